"""A request's kept-out FULL blocks left bare (``sim/cache/blocks/bare_runs.py``, switch ``BARE_RUNS``): no entry
written from the keep-out to the eviction, written where the reference reads them.

Whole runs: the private-blocks property's generated traces and configs and its fixed cases with the switch on and
off are the same run (tables, summaries), their pools pass the integrity check after each preemption and at the
end and end alike, block for block, bare blocks dressed (``tests/vllm_bare_view.py``); floors: blocks left bare,
runs of them evicted, and a preemption that writes a running request's and the tail's runs' entries. The pool
alone: a request's kept-out stretch freed (as a run, as blocks where runs are off, or where discards are told)
and evicted, switch on and off."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_vllm_own_runs_pool_property import blocks_around, freed_and_evicted
from test_vllm_private_blocks_property import (
    FIXED,
    PRIVATE_EVICTED,
    on_fixed_and_generated,
    reached,
)
from test_vllm_tail_runs_property import RUN_THEN_PREEMPTED, counted_at_end, same_counted_runs

from sim.cache.blocks import bare_runs, lazy_keys, manager, tail_runs


def run_with(trace_spec, config_spec, bare: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its pool at the end and how many blocks it left bare, the
    bare blocks a preemption dressed, and the bare blocks whose run was evicted."""
    monkeypatch.setattr(bare_runs, "BARE_RUNS", bare)
    counts = {"bare": 0, "dressed": 0, "evicted": 0}
    keep_out, dress_runs, evict_runs = lazy_keys.keep_out, bare_runs.dress_runs, tail_runs.evict_runs

    def counted_keep_out(pool, req, group, private, positions):
        counts["bare"] += len(private) * bare_runs.is_bare(pool, group)
        return keep_out(pool, req, group, private, positions)

    def counted_dress_runs(pool):
        counts["dressed"] += len(bare_runs.run_blocks(pool))
        dress_runs(pool)

    def counted_evict(pool, count, told_each):
        runs_before = sum(len(run) for _, run, _ in pool._tail.runs)
        answer = evict_runs(pool, count, told_each)
        counts["evicted"] += (
            runs_before - sum(len(run) for _, run, _ in pool._tail.runs)
        ) * pool.bare_kept_out
        return answer

    monkeypatch.setattr(lazy_keys, "keep_out", counted_keep_out)
    monkeypatch.setattr(bare_runs, "dress_runs", counted_dress_runs)
    monkeypatch.setattr("sim.cache.blocks.pool.evict_runs", counted_evict)
    abort = manager.BlockCacheManager.abort

    def checked_abort(self, request_id):  # the preemption's dressed runs are in the tail now: checked there
        abort(self, request_id)
        self.check_integrity()

    monkeypatch.setattr(manager.BlockCacheManager, "abort", checked_abort)

    return counted_at_end(trace_spec, config_spec, monkeypatch, seen, bare, counts)


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    return same_counted_runs(run_with, "bare", trace_spec, config_spec, monkeypatch)


@on_fixed_and_generated(120, *FIXED, RUN_THEN_PREEMPTED)
def test_bare_kept_out_blocks_leave_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    if (runs := reached(same_runs, trace_spec, config_spec, monkeypatch)) is None:
        return
    counts, result = runs
    event(f"bare {bool(counts[True]['bare'])}, evicted {bool(counts[True]['evicted'])}")
    event(f"dressed {bool(counts[True]['dressed'])}, {trace_spec[0]} {config_spec[0]}")


def test_the_fixed_cases_leave_blocks_bare_evict_and_dress_them(monkeypatch):
    """A replay that leaves blocks bare and evicts their runs; a timed run whose preemption dresses a run."""
    counts, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert counts[True]["bare"] and counts[True]["evicted"], counts
    counts, result = same_runs(*RUN_THEN_PREEMPTED, monkeypatch)
    assert result.requests["retractions"].sum() > 0
    assert counts[True]["bare"] and counts[True]["dressed"], counts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=blocks_around,
    num_run=st.integers(0, 8),
    split=st.integers(0, 8),
    after=blocks_around,
    num_plain=st.integers(0, 4),
    with_runs=st.booleans(),
    hears_discards=st.booleans(),
)
def test_a_bare_stretch_freed_and_evicted_as_the_reference(
    before, num_run, split, after, num_plain, with_runs, hears_discards, monkeypatch
):
    """Freed as a run, or (runs off, discards told) as blocks, its entries written first: pools and events alike."""
    shape = (before, num_run, min(split, num_run), after, num_plain)
    monkeypatch.setattr(bare_runs, "BARE_RUNS", True)
    on = freed_and_evicted(shape, with_runs, hears_discards, monkeypatch)
    monkeypatch.setattr(bare_runs, "BARE_RUNS", False)
    assert on == freed_and_evicted(shape, with_runs, hears_discards, monkeypatch)
