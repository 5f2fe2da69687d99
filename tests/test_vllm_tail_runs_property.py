"""Kept-out private blocks as runs in the free queue's tail (``sim/cache/blocks/tail_runs.py``, ``OWN_RUNS``).

The tail alone: generated frees (of single blocks, plain stretches and runs), hits of plain blocks, pops and a
flatten, on a ``RunTail`` holding runs and on the reference ``FreeTail`` given each run's blocks as entries, pop
the same blocks in the same order and leave the same live tail (runs split at a pop's end, compaction moving the
runs' places, a run's blocks with stale entries ahead of it). Whole runs: the private-blocks property's generated
traces and configs and its fixed cases with the switch on and off are the same run, and their pools end alike,
block for block (the queue, keys, counts, marks, the counts by kind); floors: runs made and evicted, one split,
and a preemption that makes the runs entries again."""

from __future__ import annotations

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_vllm_private_blocks_property import (
    FIXED,
    PRIVATE_EVICTED,
    both_ways_or_skip,
    on_fixed_and_generated,
    reached,
    run_seen_at_end,
)
from vllm_bare_view import dressed_entries

from sim.cache.blocks import tail_runs
from sim.cache.blocks.tail import FreeTail
from sim.cache.blocks.tail_runs import RunTail

NUM_BLOCKS = 16
# a FULL run made, then a preemption that makes it entries again (PREEMPTED, tiny-swa, makes no run)
RUN_THEN_PREEMPTED = (
    ("fanout", (2, 8, 300, 60, 200)),
    ("timed", "inkling", {"async_scheduling": True}, 3000),
)
# each op: ("free" / "run", how many held blocks), ("hit", which tail blocks), ("pop", how many), ("flatten", -)
ops = st.lists(
    st.tuples(
        st.sampled_from(["free", "run", "hit", "pop", "flatten"]),
        st.integers(0, NUM_BLOCKS),
        st.integers(0, 1 << 16),
    ),
    max_size=60,
)
# a hit plain block freed again into a run after its stale entry: the pop meets the stale entry, then splits the run
STALE_THEN_RUN = [("free", 3, 0), ("hit", 1, 2), ("run", 2, 0), ("free", 2, 0), ("pop", 3, 0), ("pop", 3, 0)]
# a pop that compacts the tail's entries (5 consumed of 8) while a run is pending: its place moves with them
COMPACTED = [("free", 5, 0), ("run", 2, 0), ("free", 3, 0), ("pop", 5, 0), ("pop", 5, 0)]


def replay(made: list, with_runs: bool) -> list:
    """Each op on a tail compacting at 4 entries (a run's blocks given as entries without runs): the pops'
    blocks and the live tail after each. Hits take plain blocks only, as in the pool (no hit finds a run's)."""
    queue = RunTail(NUM_BLOCKS, compact_at=4) if with_runs else FreeTail(NUM_BLOCKS, compact_at=4)
    held, in_runs, log = list(range(1, NUM_BLOCKS)), set(), []
    for op, num, pick in made:
        if op in ("free", "run"):
            count = num % (len(held) + 1)
            freed, held = held[:count], held[count:]
            if op == "run" and freed and with_runs:
                queue.extend_run(freed, pick % 3)
            else:
                queue.extend(freed)
            in_runs.update(freed if op == "run" else ())
        live = queue.live()
        if op == "hit" and (plain := [block for block in live if block not in in_runs]):
            hit = [block for index, block in enumerate(plain) if pick >> index & 1][: max(1, num)]
            queue.take(hit)
            held = hit + held
        elif op == "pop" and queue.size:
            count = min(max(1, num), queue.size)
            popped = queue.pop_runs(count)[0] if with_runs and queue.runs else queue.pop_oldest(count)
            in_runs.difference_update(popped)
            held += popped
            log.append(popped)
        elif op == "flatten" and with_runs:
            queue.flatten()
        log.append((queue.live(), queue.size, queue._num_stale))
    return log


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=STALE_THEN_RUN)
@example(made=COMPACTED)
@given(made=ops)
def test_a_tail_with_runs_pops_as_the_reference(made):
    assert replay(made, True) == replay(made, False)


def test_the_fixed_ops_meet_a_stale_entry_then_a_run_and_compact_before_one():
    log = replay(STALE_THEN_RUN, True)
    assert log[-5] == ([1, 3, 2, 4, 5, 6], 6, 1)  # entries 1 2 3 [2 4] 5 6: the first 2 stale, then a run
    assert log[-4] == [1, 3, 2] and log[-3] == ([4, 5, 6], 3, 0)  # the run split after 2
    assert log[-2] == [4, 5, 6] and log[-1] == ([], 0, 0)
    log = replay(COMPACTED, True)
    assert log[-4] == [1, 2, 3, 4, 5] and log[-2] == [6, 7, 8, 9, 10]


def pool_at_end(pool) -> tuple:
    """What the pool holds, block for block (a kept-out block's ``Unkeyed`` mark by its kind: a run's own)."""
    counts_by_kind = (pool.held, pool.cached_free, pool.num_evictions)
    return pool.queue(), *dressed_entries(pool), counts_by_kind  # bare blocks dressed (``bare_runs.py``)


def run_with(trace_spec, config_spec, with_runs: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its pool at the end and how many runs it made, evicted (whole
    or a part), split and made entries again while it held some."""
    monkeypatch.setattr(tail_runs, "OWN_RUNS", with_runs)
    counts = {"made": 0, "evicted": 0, "split": 0, "flattened": 0}
    extend_run, pop_runs, flatten = RunTail.extend_run, RunTail.pop_runs, RunTail.flatten

    def counted_extend(tail, blocks, group):
        counts["made"] += 1
        extend_run(tail, blocks, group)

    def counted_pop(tail, count):
        answer = pop_runs(tail, count)
        counts["evicted"] += len(answer[2])
        counts["split"] += bool(tail.runs) and any(part is not tail.runs[0][1] for part, _ in answer[2][-1:])
        return answer

    def counted_flatten(tail):
        counts["flattened"] += bool(tail.runs)
        flatten(tail)

    monkeypatch.setattr(RunTail, "extend_run", counted_extend)
    monkeypatch.setattr(RunTail, "pop_runs", counted_pop)
    monkeypatch.setattr(RunTail, "flatten", counted_flatten)

    return counted_at_end(trace_spec, config_spec, monkeypatch, seen, with_runs, counts)


def counted_at_end(trace_spec, config_spec, monkeypatch, seen: dict, switch: bool, counts: dict) -> tuple:
    """The run; ``seen[switch]`` gets its pool at the end and what ``counts`` counted by then."""

    def ended(manager, watcher):
        seen[switch] = (pool_at_end(manager.pool), dict(counts))

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, ended)


def same_counted_runs(run_with, off_count: str, trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    """Both runs of ``run_with`` held equal, and their pools at the end; what each counted (True: the switch on),
    ``off_count`` none with the switch off."""
    seen: dict = {}
    on = both_ways_or_skip(lambda on: run_with(trace_spec, config_spec, on, monkeypatch, seen))
    assert seen[True][0] == seen[False][0]
    assert seen[False][1][off_count] == 0
    return {flag: counted for flag, (_, counted) in seen.items()}, on[1]


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    return same_counted_runs(run_with, "made", trace_spec, config_spec, monkeypatch)


@on_fixed_and_generated(120, *FIXED, RUN_THEN_PREEMPTED)
def test_kept_out_runs_leave_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    if (runs := reached(same_runs, trace_spec, config_spec, monkeypatch)) is None:
        return
    counts, result = runs
    event(f"runs made {bool(counts[True]['made'])}, evicted {bool(counts[True]['evicted'])}")
    event(f"split {bool(counts[True]['split'])}, flattened {bool(counts[True]['flattened'])}")
    event(f"preempted {bool(result.requests['retractions'].sum())}, {trace_spec[0]} {config_spec[0]}")


def test_the_fixed_cases_make_split_and_flatten_runs(monkeypatch):
    """A replay that evicts runs and splits one; a timed run whose preemption makes its runs entries again."""
    counts, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert counts[True]["made"] and counts[True]["evicted"] and counts[True]["split"], counts
    counts, result = same_runs(*RUN_THEN_PREEMPTED, monkeypatch)
    assert result.requests["retractions"].sum() > 0
    assert counts[True]["made"] and counts[True]["flattened"], counts
