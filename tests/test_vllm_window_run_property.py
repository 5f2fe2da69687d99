"""An SWA window's release (``steps.release_window``) reads down from the window's top only as far as the live
run goes (``by_id.RUN_BY_SLICES`` on: one loop nulling and splitting when compiled, C passes over slices each
twice the last when pure), where the reference (off) copies the whole table below the top. Over generated
tables (runs of nulls and of blocks, hundreds long, so a run crosses several slices) the run is nulled alike and
its blocks split alike into hashed and unhashed, highest first, both bodies; whole ``vllm`` runs with the switch
on and off are the same run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import by_id
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

# a table as runs: (live, length); its blocks numbered up from 1, each hashed or not by a bit of ``hashed_bits``
runs = st.lists(st.tuples(st.booleans(), st.integers(1, 300)), min_size=1, max_size=6)
LONG_RUN = [(False, 3), (True, 200), (False, 1), (True, 150)]  # the top run crosses two slices (64, then 128)


def table_of(made: list) -> list:
    table, block = [], 1
    for live, length in made:
        if live:
            table += range(block, block + length)
            block += length
        else:
            table += [None] * length
    return table


def released(made: list, top_at: int, hashed_bits: int, loops: bool, sliced: bool, monkeypatch) -> tuple:
    """The split and the table after ``null_live_run`` from index ``top_at`` (mod the table's length)."""
    monkeypatch.setattr(by_id, "LOOPS", loops)
    monkeypatch.setattr(by_id, "RUN_BY_SLICES", sliced)
    table = table_of(made)
    # key 0 is falsy, not None: hashed all the same
    entries = [(0 if hashed_bits >> (block % 61) & 1 else None) for block in range(len(table) + 1)]
    top = top_at % len(table)
    if table[top] is None:
        return (), table  # the caller frees nothing there
    split = by_id.null_live_run(table, top, entries)
    return split, table


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=LONG_RUN, top_at=353, hashed_bits=0b1010)
@example(made=[(True, 5)], top_at=4, hashed_bits=0)  # the run reaches index 0
@example(made=[(True, 130)], top_at=129, hashed_bits=-1)  # index 0 past two slices, each block hashed
@given(made=runs, top_at=st.integers(0, 1 << 11), hashed_bits=st.integers(-1, (1 << 61) - 1))
def test_a_window_run_is_released_as_the_reference(made, top_at, hashed_bits, monkeypatch):
    done = [
        released(made, top_at, hashed_bits, loops, sliced, monkeypatch)
        for loops, sliced in ((True, True), (False, True), (False, False))
    ]
    assert done[0] == done[1] == done[2]


def test_the_long_run_is_split_highest_first(monkeypatch):
    (hashed, unhashed), table = released(LONG_RUN, 353, 0b10, False, True, monkeypatch)
    assert hashed == [306, 245]  # block % 61 == 1: bit 1
    assert unhashed == [block for block in range(350, 200, -1) if block not in (306, 245)]
    assert table[204:] == [None] * 150 and None not in table[3:203]


RUNS = (
    (fanout(2, 12, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=2000)),
    (multiturn(3, 4, 200, 48, 60), SimConfig(policy="vllm", mode="timed", bounds=False, pool_tokens=4000)),
)


@pytest.mark.parametrize("case", range(len(RUNS)))
@pytest.mark.parametrize("loops", [False, True])
def test_whole_runs_are_the_same_with_the_switch(case, loops, monkeypatch):
    trace, config = RUNS[case]
    monkeypatch.setattr(by_id, "LOOPS", loops)

    def run(on: bool) -> tuple:
        monkeypatch.setattr(by_id, "RUN_BY_SLICES", on)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
