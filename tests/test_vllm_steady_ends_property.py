"""A steady decode run's ends with their usual work written out in the loop (``sim/cache/blocks/steady_ends.py``,
switch ``STEADY_ENDS``) leave the block manager exactly as ``_take_ends``' reference loop (switch off) does: each
request's tables, counts and keys, the free queue in order, ref counts, hashes, held and cached counters and every
event in order, compared after admitting each request and after every decode segment, over the layouts, windows,
retention intervals, async scheduling and pools of ``test_vllm_decode_fast_path_property.py``, with and without a
``BlocksDiscarded`` handler (which sends the run to the reference) and with private blocks marked; the pool's
integrity checked at the end.

The fixed examples hold floors on what the loop takes itself: the window's unhashed rows and the steady states
pushed onto the head, and blocks per group taken off its top; and on what it leaves to the reference (a window's
row it cannot take, an allocation the head cannot give)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vllm_boundary_run_property import FIXED, three_runs
from test_vllm_decode_fast_path_property import configurations, snapshot, workloads

from sim.cache.blocks import pool, steady_ends
from sim.tokens import TokenSeq

REACHED: Counter = Counter()  # what the loop took itself, over the fixed examples


def counting(monkeypatch) -> None:
    """Count the loop's own paths, and the pool's allocations it leaves to ``get_block_per_group``."""
    free_row, take_top, per_group = (
        steady_ends._free_row,
        steady_ends._take_top,
        pool.BlockPool.get_block_per_group,
    )

    def rows(tables, head, key_at, index, below_gone=False):
        taken = free_row(tables, head, key_at, index, below_gone)
        REACHED[("window" if below_gone else "state", taken)] += 1
        return taken

    def tops(head, tables, count):
        REACHED["taken off the top"] += 1
        return take_top(head, tables, count)

    def from_pool(self):
        REACHED["left to the pool"] += steady_ends.STEADY_ENDS  # the reference calls it too: counted on only
        return per_group(self)

    monkeypatch.setattr(pool.BlockPool, "get_block_per_group", from_pool)
    monkeypatch.setattr(steady_ends, "_free_row", rows)
    monkeypatch.setattr(steady_ends, "_take_top", tops)


def flipped(run, switch: bool, method: str, *args) -> None:
    """``run.method(*args)`` with the loop on or off."""
    steady_ends.STEADY_ENDS = switch
    try:
        getattr(run, method)(*args)
    finally:
        steady_ends.STEADY_ENDS = True


def compare(configuration, workload, hears_discards: bool, private: bool) -> None:
    """The loop (on) against the reference (off), compared after admitting each request and each decode segment."""
    model, knobs, num_blocks = configuration
    requests, segments = workload
    try:
        # both through the run loop (``three_runs``' first), the one with the steady loop, the other without
        on, off = (three_runs(model, knobs, num_blocks, hears_discards, private)[0] for _ in range(2))
    except ValueError:  # the start-up check: the pool cannot hold one max_model_len request
        return
    for index, (shared_len, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        tokens = TokenSeq.of("r:shared", shared_len) + TokenSeq.of("r:" + rid, own_len)
        tokens = tokens + TokenSeq.of("o:" + rid, output_len)
        for run, switch in ((on, True), (off, False)):
            flipped(run, switch, "start", rid, tokens, shared_len + own_len, output_len)
        assert snapshot(on) == snapshot(off), f"after admitting {rid}"
        assert on.manager.pool.private == off.manager.pool.private
    for position, num_steps in enumerate(segments):
        if not on.remaining:
            break
        rid = sorted(on.remaining)[position % len(on.remaining)]
        for run, switch in ((on, True), (off, False)):
            flipped(run, switch, "decode", rid, num_steps)
        assert on.remaining == off.remaining
        assert snapshot(on) == snapshot(off), f"after {num_steps} steps of {rid}"
        assert on.manager.pool.private == off.manager.pool.private
    on.manager.check_integrity()


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), workloads(), st.booleans(), st.booleans())
def test_the_steady_loop_leaves_the_block_manager_as_the_reference(
    configuration, workload, hears_discards, private
):
    compare(configuration, workload, hears_discards, private)


@pytest.mark.interpreted  # counts through patched functions, which compiled callers never reach
def test_the_fixed_runs_reach_the_loops_own_paths(monkeypatch):
    """Floors over the fixed runs alone: rows of both kinds taken and left, blocks taken off the head's top."""
    REACHED.clear()
    counting(monkeypatch)
    for case in FIXED:
        compare(*case)
    assert REACHED[("state", True)] >= 1, REACHED
    assert REACHED[("window", True)] >= 1 and REACHED[("window", False)] >= 1, REACHED
    assert REACHED["taken off the top"] >= 1 and REACHED["left to the pool"] >= 1, REACHED
