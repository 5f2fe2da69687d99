"""The block pool's per-block lists (``sim/cache/blocks/by_id.py``): each batch operation's two bodies, the loop
(``LOOPS`` on, the compiled core's) and the C pass (off, pure Python's), give the same answer and leave the same
list (a table's first null found alike), over generated lists and batches (repeated blocks, empty batches); and
whole ``vllm`` runs with the switch on and off are the same run (replay and timed: evictions, shared blocks,
preemptions)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import by_id
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

NUM_BLOCKS = 12
keys = st.lists(
    st.one_of(st.none(), st.tuples(st.binary(max_size=2), st.integers(0, 3))),
    min_size=NUM_BLOCKS,
    max_size=NUM_BLOCKS,
)
counts = st.lists(st.integers(0, 3), min_size=NUM_BLOCKS, max_size=NUM_BLOCKS)
batches = st.lists(st.integers(1, NUM_BLOCKS - 1), max_size=8)


def both(monkeypatch, call, entries: list) -> tuple:
    """``call(entries)`` with the loops and with the C passes, each on its own copy: (answer, list) each."""
    done = []
    for loops in (True, False):
        monkeypatch.setattr(by_id, "LOOPS", loops)
        copy = list(entries)
        done.append((call(copy), copy))
    return done[0], done[1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=keys, count_entries=counts, blocks=batches, value=st.integers(0, 3))
def test_the_loops_and_the_c_passes_agree(entries, count_entries, blocks, value, monkeypatch):
    values = [(bytes([block]), block) for block in blocks]
    for call, on in (
        (lambda e: by_id.all_none(e, blocks), entries),
        (lambda e: by_id.read(e, blocks), entries),
        (lambda e: by_id.write(e, blocks, values), entries),
        (lambda e: by_id.take(e, blocks, None), entries),
        (lambda e: by_id.all_equal(e, blocks, value), count_entries),
        (lambda e: by_id.fill(e, blocks, value), count_entries),
        (by_id.first_none, entries),
        (by_id.has_none, entries),
    ):
        loops, passes = both(monkeypatch, call, on)
        assert loops == passes


def test_a_fixed_batch_reads_each_answer():
    entries: list = [None, ("a", 0), None, ("b", 1)]
    assert by_id.all_none(entries, [0, 2]) and not by_id.all_none(entries, [2, 3])
    assert by_id.take(entries, [3, 1], None) == [("b", 1), ("a", 0)] and entries == [None] * 4
    assert by_id.all_equal([1, 0, 1], [0, 2], 1) and not by_id.all_equal([1, 0, 1], [0, 1], 1)
    assert by_id.first_none([3, 4, None, 5, None]) == 2 and by_id.first_none([3, 4]) == 2
    assert by_id.has_none([3, None]) and not by_id.has_none([3, 4]) and not by_id.has_none([])


RUNS = (
    (fanout(2, 12, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=2000)),
    (
        multiturn(3, 4, 200, 48, 60),
        SimConfig(
            policy="vllm", mode="timed", bounds=False, pool_tokens=4000, knobs={"async_scheduling": True}
        ),
    ),
    (
        fanout(2, 8, 300, 60, 200),
        SimConfig(policy="vllm", model="tiny-swa", mode="timed", bounds=False, pool_tokens=2000),
    ),
)


@pytest.mark.parametrize("case", range(len(RUNS)))
def test_whole_runs_are_the_same_with_the_loops_and_the_c_passes(case, monkeypatch):
    trace, config = RUNS[case]

    def run(loops: bool) -> tuple:
        monkeypatch.setattr(by_id, "LOOPS", loops)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
