"""The step table made without new copies (``step_log``'s ``FRAME_UNCOPIED``: the frame holds the arrays it made;
``TIMES_AS_DOUBLES``: the time columns as machine doubles) is the reference's table: logs fed the same full rows and
runs of decode steps make equal frames, dtypes included, with every switch on and off; the lean frame is its own
(writing to the log after it changes nothing in it) and really uncopied (a block a column, not one a dtype); whole
timed runs of every loop that writes rows, bounds on and off, give the same tables and summary."""

from __future__ import annotations

from contextlib import ExitStack
from itertools import product
from unittest import mock

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from step_feeds import POOLS, fed_log

from sim.run import step_log
from sim.run.simulate import SimConfig, simulate
from sim.run.step_log import StepLog
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

COUNT = st.integers(0, 1 << 40)
ROW = st.tuples(st.integers(0, (1 << 62) - 400), st.floats(0, 1e6), st.floats(0, 1.0), COUNT, COUNT, COUNT)
RUN = st.tuples(st.integers(0, (1 << 62) - 400), st.integers(0, 300), st.integers(1, 64))
FEEDS = st.lists(st.one_of(ROW.map(lambda row: ("row", row)), RUN.map(lambda run: ("run", run))), max_size=12)
SWITCHES = ("FRAME_UNCOPIED", "TIMES_AS_DOUBLES", "INT_COLUMNS_AS_BLOCKS")


def _fed(feeds: list, on: tuple[bool, ...]) -> tuple[StepLog, pd.DataFrame]:
    """A log made and fed with the switches as ``on`` (``SWITCHES``' order), and the frame it made so (kept
    beside it: a compiled ``StepLog`` takes no new attribute)."""
    with ExitStack() as stack:
        for name, value in zip(SWITCHES, on, strict=True):
            stack.enter_context(mock.patch.object(step_log, name, value))
        log = fed_log(StepLog(), feeds)
        frame_made = log.frame()
    return log, frame_made


@settings(max_examples=150, deadline=None, derandomize=True)
@given(FEEDS)
@example([("run", (0, 0, 3)), ("row", (0, 0.0, 0.1, 0, 0, 2)), ("run", (1, 5, 2)), ("run", (6, 1, 2))])
@example(
    [("row", (3, 1.0, 0.1, 2, 900, 1)), ("run", ((1 << 62) - 400, 300, 64)), ("row", (5, 2.0, 0.1, 0, 0, 0))]
)
def test_the_lean_frame_is_the_reference_table(feeds):
    reference = _fed(feeds, (False, False, False))[1]
    for on in product((False, True), repeat=3):
        log, made = _fed(feeds, on)
        assert list(made.dtypes) == list(reference.dtypes) and list(made.columns) == list(reference.columns)
        assert made.equals(reference), on
        before = made.copy()
        log.append((1, 9.0, 0.5, 1, 1, 1), POOLS)  # the log goes on: the table made is its own
        assert made.equals(before)


def test_the_lean_frame_holds_a_block_a_column():
    feeds = [("run", (1, 50, 4)), ("row", (51, 30.0, 0.1, 1, 64, 3))]
    lean, copied = _fed(feeds, (True, True, True))[1], _fed(feeds, (False, True, True))[1]
    assert len(lean._mgr.blocks) == len(lean.columns) and len(copied._mgr.blocks) == 2


@pytest.mark.parametrize("policy", ["radix", "sglang", "no-cache", "freetoken", "marconi-vllm", "vllm"])
def test_whole_runs_make_the_same_tables_lean(policy):
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), bounds=bounds)
        trace = Trace(growing_burst(6))
        lean = simulate(trace, config)
        with (
            mock.patch.object(step_log, "FRAME_UNCOPIED", False),
            mock.patch.object(step_log, "TIMES_AS_DOUBLES", False),
        ):
            reference = simulate(trace, config)
        assert_same_run(lean, reference)
        assert len(lean.steps) > 50 and len(lean.steps._mgr.blocks) == len(lean.steps.columns)
