"""The request table built a chunk at a time equals the table built in one go: values, dtypes, index; joined a
column at a time (``BY_COLUMN``) or whole (the reference), and each column's pieces freed as it is joined."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run import table_chunks
from sim.run.config import SimConfig
from sim.run.metrics import request_table
from sim.run.simulate import simulate
from sim.run.table_chunks import frame_of_rows
from sim.sched.request import REQUEST_COLUMNS
from sim.trace.generate import multiturn

COLUMNS = ("id", "n", "x", "flag", "note")
VALUE = {
    "n": st.one_of(st.none(), st.integers(-5, 10**6)),
    "x": st.one_of(st.none(), st.floats(allow_nan=False), st.integers(0, 9)),
    "flag": st.one_of(st.none(), st.booleans()),
    "note": st.one_of(st.none(), st.text(max_size=3)),
}
ROW = st.tuples(st.text(min_size=1, max_size=4), *(VALUE[c] for c in COLUMNS[1:]))


def _same(built: pd.DataFrame, direct: pd.DataFrame) -> None:
    assert built.dtypes.equals(direct.dtypes)
    pd.testing.assert_frame_equal(built, direct, check_exact=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=40), st.integers(1, 9), st.booleans())
def test_chunks_equal_one_go_for_any_mix_of_values(rows, chunk_len, by_column):
    saved, table_chunks.BY_COLUMN = table_chunks.BY_COLUMN, by_column
    try:
        _same(frame_of_rows(lambda: iter(rows), COLUMNS, chunk_len), pd.DataFrame(rows, columns=COLUMNS))
    finally:
        table_chunks.BY_COLUMN = saved


def test_a_joined_column_leaves_the_chunks():
    rows = [("a", 1, 1.5, True, "x"), ("b", 2, 2.5, False, "y"), ("c", 3, 0.5, None, None)]
    chunks = [table_chunks._columns_of(pd.DataFrame(rows[:2], columns=COLUMNS)),
              table_chunks._columns_of(pd.DataFrame(rows[2:], columns=COLUMNS))]
    assert all(len(chunk._mgr.blocks) == len(COLUMNS) for chunk in chunks)  # a block a column: each frees alone
    expected = pd.concat(chunks, ignore_index=True)
    _same(table_chunks._joined(chunks), expected)
    assert all(chunk.columns.empty for chunk in chunks)


def test_duplicate_column_names_join_whole():
    rows = [(1, 2), (3, 4), (5, 6)]
    _same(frame_of_rows(lambda: iter(rows), ("a", "a"), 2), pd.DataFrame(rows, columns=("a", "a")))


def test_chunks_that_disagree_fall_back_to_one_go():
    rows = [("a", 1, 1.5, True, "x")] * 3 + [("b", None, None, None, None)] * 3
    calls = []

    def make_rows():
        calls.append(1)
        return iter(rows)

    _same(frame_of_rows(make_rows, COLUMNS, 3), pd.DataFrame(rows, columns=COLUMNS))
    assert len(calls) == 2  # dtypes differ between the chunks: the rows were made again


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_a_runs_request_table_is_the_same_in_chunks(mode, monkeypatch):
    trace = multiturn(num_sessions=6, num_turns=3, system_len=256, user_len=64, output_len=32)
    seen = {}

    def keep(states):
        seen["states"] = list(states)
        return request_table(seen["states"])

    monkeypatch.setattr("sim.run.simulate.request_table", keep)
    monkeypatch.setattr("sim.run.simulate.REPLAY_RECORDS", False)  # the states' rows (tests/test_replay_records.py)
    simulate(trace, SimConfig(policy="sglang-retain", mode=mode, bounds=False))
    rows = [state.row() for state in seen["states"]]
    for chunk_len in (1, 2, 5, 7):
        _same(
            frame_of_rows(lambda: iter(rows), REQUEST_COLUMNS, chunk_len),
            pd.DataFrame(rows, columns=REQUEST_COLUMNS),
        )
