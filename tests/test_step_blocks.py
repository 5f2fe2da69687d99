"""The step table's integer columns kept as blocks (``sim/run/step_blocks.py``, ``step_log``'s
``INT_COLUMNS_AS_BLOCKS``) make the same table as the reference, which writes them row by row.

Two logs fed the same full rows (any counts, step numbers anywhere in int64) and runs of decode steps (0 to 300
steps) make the same frame, dtypes included, and the blocks' four columns are the reference's, value for value;
whole timed runs of every loop that writes rows (SGLang's, the default loop's, FreeToken's, Marconi-vLLM's), bounds on and
off, give the same tables and summary with the switch on and off, and their own blocks put a floor on the runs
that went in as one block."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_run_counting
from step_feeds import fed_log

from sim.run import step_log
from sim.run.simulate import SimConfig
from sim.run.step_blocks import StepBlocks
from sim.run.step_log import INT_COLUMNS, StepLog
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

COUNT = st.integers(0, 1 << 40)
ROW = st.tuples(st.integers(0, (1 << 62) - 400), st.floats(0, 1e6), st.floats(0, 1.0), COUNT, COUNT, COUNT)
RUN = st.tuples(st.integers(0, (1 << 62) - 400), st.integers(0, 300), st.integers(1, 64))
FEEDS = st.lists(st.one_of(ROW.map(lambda row: ("row", row)), RUN.map(lambda run: ("run", run))), max_size=12)


def _fed(feeds: list, in_blocks: bool) -> StepLog:
    with mock.patch.object(step_log, "INT_COLUMNS_AS_BLOCKS", in_blocks):
        log = StepLog()
    assert (log.blocks is not None) == in_blocks
    return fed_log(log, feeds)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(FEEDS)
@example([("run", (0, 0, 3)), ("row", (0, 0.0, 0.1, 0, 0, 2)), ("run", (1, 5, 2)), ("run", (6, 1, 2))])
@example([("row", (3, 1.0, 0.1, 2, 900, 1)), ("run", ((1 << 62) - 400, 300, 64)), ("row", (5, 2.0, 0.1, 0, 0, 0))])
@example([("run", (9, 4, 1)), ("run", (2, 0, 5)), ("run", (1, 3, 2))])  # numbers going back, an empty run
def test_the_blocks_make_the_row_by_row_table(feeds):
    blocks, reference = _fed(feeds, True), _fed(feeds, False)
    assert len(blocks) == len(reference) == 1 + sum(args[1] if kind == "run" else 1 for kind, args in feeds)
    columns = blocks.blocks.columns()
    for name, column in zip(("step",) + INT_COLUMNS, columns, strict=True):
        assert column.dtype == np.int64 and column.tolist() == list(reference.columns[name]), name
    made, expected = blocks.frame(), reference.frame()
    assert list(made.dtypes) == list(expected.dtypes) and list(made.columns) == list(expected.columns)
    assert made.equals(expected)


def test_an_empty_log_makes_the_empty_table():
    assert _fed([], True).frame().equals(_fed([], False).frame())
    with mock.patch.object(step_log, "INT_COLUMNS_AS_BLOCKS", True):
        empty = StepLog()
    assert len(empty) == 0 and empty.frame().equals(StepLog().frame())
    assert [column.tolist() for column in StepBlocks().columns()] == [[], [], [], []]


def _runs_in_blocks(trace: Trace, config: SimConfig) -> int:
    """The run with the blocks, asserted equal to the run row by row; returns how many blocks of two rows or
    more the first wrote."""
    more_than_a_row = lambda args, _: args[2] >= 2  # noqa: E731  (args: the blocks, first step, count, ...)
    return same_run_counting(trace, config, StepBlocks, "add", more_than_a_row, step_log, "INT_COLUMNS_AS_BLOCKS")


@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", ["radix", "sglang", "marconi-sglang", "no-cache", "freetoken", "marconi-vllm"])
def test_whole_runs_make_the_same_tables_from_blocks(policy, page):
    knobs = dict(page_size=page, track_interval=64)
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds)
        assert _runs_in_blocks(Trace(growing_burst(6)), config) >= 3
