"""A steady decode run's boundary steps taken in one loop (``sim/cache/blocks/boundary_run.py``, switch
``boundary_runs``) leave the block manager exactly as the reference loop of ``take_boundary_step`` (switch off) and as
step-by-step decoding do: each request's tables, counts and keys, the free queue in order, ref counts, hashes,
counters and every event in order, compared after every decode segment, over the layouts, windows, retention
intervals, async scheduling and pools of ``test_vllm_decode_fast_path_property.py``; with and without a
``BlocksDiscarded`` handler (each free's discard told in its step, each eviction's before its eviction) and with
private blocks marked (a FULL block's private mark written at the run's end).

The fixed examples hold floors on what the run loop reaches: the window's frees left to the run's end, the
steady states' pushes, and a run's allocations evicting several blocks at once (each told alone)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vllm_decode_fast_path_property import Run, configurations, snapshot, workloads

from sim.cache.blocks import boundary_frees, pool
from sim.cache.events import BlocksDiscarded
from sim.models import get_model
from sim.tokens import TokenSeq

REACHED: Counter = Counter()  # what the run loop took, over the fixed examples


def counting(monkeypatch) -> None:
    """Count the run loop's bulk paths as they are taken."""
    frees, steady, evict = (
        boundary_frees.RunFrees.flush,
        boundary_frees.RunFrees._steady_states,
        pool.BlockPool._evict_oldest,
    )

    def flush(self):
        REACHED["window at end"] += self.num_passed
        return frees(self)

    def steady_states(self, below):
        taken = steady(self, below)
        REACHED["steady states"] += taken
        return taken

    def evicts(self, count, told_each=False):
        REACHED["evicted at once"] += told_each and count > 1
        return evict(self, count, told_each)

    monkeypatch.setattr(boundary_frees.RunFrees, "flush", flush)
    monkeypatch.setattr(boundary_frees.RunFrees, "_steady_states", steady_states)
    monkeypatch.setattr(pool.BlockPool, "_evict_oldest", evicts)


def three_runs(model, knobs: dict, num_blocks: int, hears_discards: bool, private: bool) -> list[Run]:
    """The run loop, the reference loop, step by step through ``allocate_slots``' walk (each group's block
    allocated by its own ``get_new_blocks`` call: each eviction told alone)."""
    runs = [Run(model, knobs, num_blocks, fast=True), Run(model, knobs, num_blocks, fast=True)]
    runs.append(Run(model, knobs, num_blocks, fast=False))
    runs[1].manager.boundary_runs = False
    runs[2].manager.one_block_hash = runs[2].manager.steady_steps = False  # ``_step``: a block per call
    for run in runs:
        if not hears_discards:
            run.manager.events.channel(BlocksDiscarded).clear()
        if private:  # every request's output is its own: its decoded blocks are private
            run.manager.shared_sources = frozenset(["r:shared", *(f"r:r{index}" for index in range(4))])
            run.manager.pool.marks_private = True
        # the paths compared here hash a block alike, but only a prefill step's ``cache_blocks`` keeps a private
        # block out of the map (``out_of_map.py``, held to the reference by its own property): all listed here
        run.manager.pool.keeps_private_out = False
    return runs


def state(run: Run) -> tuple:
    """``snapshot`` and the pool's private marks."""
    return (*snapshot(run), tuple(run.manager.pool.private))


def compare(configuration, workload, hears_discards: bool, private: bool) -> None:
    """The three runs, compared after admitting each request and after every decode segment."""
    model, knobs, num_blocks = configuration
    requests, segments = workload
    try:
        runs = three_runs(model, knobs, num_blocks, hears_discards, private)
    except ValueError:  # the start-up check: the pool cannot hold one max_model_len request
        return
    for index, (shared_len, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        tokens = TokenSeq.of("r:shared", shared_len) + TokenSeq.of("r:" + rid, own_len)
        tokens = tokens + TokenSeq.of("o:" + rid, output_len)
        for run in runs:
            run.start(rid, tokens, shared_len + own_len, output_len)
        assert state(runs[0]) == state(runs[1]) == state(runs[2]), f"after admitting {rid}"
    for position, num_steps in enumerate(segments):
        if not runs[0].remaining:
            break
        rid = sorted(runs[0].remaining)[position % len(runs[0].remaining)]
        for run in runs:
            run.decode(rid, num_steps)
        assert runs[0].remaining == runs[1].remaining == runs[2].remaining
        assert state(runs[0]) == state(runs[1]) == state(runs[2]), f"after {num_steps} steps of {rid}"
    runs[0].manager.check_integrity()


# inkling's layout (3 SWA, 1 FULL, 4 Mamba groups) at vLLM's defaults but a shorter window and chunk: roomy pools
# (the prompt's kept SWA tail leaving the window: its frees left to the run's end; the steady states) and tight
# ones (a run's allocations evicting)
INKLING_KNOBS = dict(
    page_size=16,
    async_scheduling=True,
    junction=True,
    prefill_checkpoints=False,
    chunked_prefill_size=128,
    retention_interval=0,
)
LONG_DECODES = ([(200, 100, 500), (0, 300, 600), (150, 120, 400)], [200, 150, 200, 180, 200, 150, 200])
FIXED = [
    ((get_model("inkling").replace(window=256), INKLING_KNOBS, 700), LONG_DECODES, False, False),
    ((get_model("inkling").replace(window=256), INKLING_KNOBS, 700), LONG_DECODES, True, True),
    ((get_model("inkling").replace(window=64), INKLING_KNOBS, 200), LONG_DECODES, False, False),
    ((get_model("inkling").replace(window=64), INKLING_KNOBS, 200), LONG_DECODES, True, True),
]


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), workloads(), st.booleans(), st.booleans())
def test_the_run_loop_leaves_the_block_manager_as_the_reference(
    configuration, workload, hears_discards, private
):
    compare(configuration, workload, hears_discards, private)


@pytest.mark.interpreted  # counts through patched methods, which compiled callers never reach
def test_the_fixed_runs_reach_the_bulk_paths(monkeypatch):
    """Floors over the fixed runs alone, never over generated examples: the window's frees left to the run's
    end, the steady states' pushes, a run's allocations evicting several blocks at once."""
    REACHED.clear()
    counting(monkeypatch)
    for case in FIXED:
        compare(*case)
    assert REACHED["window at end"] >= 1 and REACHED["steady states"] >= 1, REACHED
    assert REACHED["evicted at once"] >= 1, REACHED
