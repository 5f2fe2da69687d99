"""The step table's pool columns kept as marks and moves (``sim/run/pool_marks.py``, written by
``StepLog.append`` / ``extend_decode_only`` / ``extend_batch_run``) are, row by row, the reference's: each
full step's pools, a plain run repeating the row before, and each batch run's rows from ``run_pool_columns``
over its full steps (page-starting stretches of 1, 2, 16 or 64 pages a step, event steps' pools, a finishing
step that only moved lengths), with one KV pool or two (SWA), in any order the engine writes them; with a pool
the model has not (every mark 0, no move) made as zeros (``ZERO_COLUMNS_UNWRITTEN``) or taken (the reference)."""

from __future__ import annotations

from array import array
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.pools import PoolUsage
from sim.run import pool_marks
from sim.run.metrics import POOL_COLUMNS
from sim.run.step_log import STEP_COLUMNS, StepLog, run_pool_columns
from sim.sched.batch import FullStep

POOLS = st.tuples(*[st.integers(0, 5000)] * len(POOL_COLUMNS))
# a model without SWA or Mamba pools (``radix``): their six columns 0 at every mark
FULL_ONLY = st.tuples(*[st.integers(0, 5000)] * 3, *[st.just(0)] * 6)


def _usage(pools: tuple[int, ...]) -> dict:
    return {FULL: PoolUsage(*pools[0:3]), SWA: PoolUsage(*pools[3:6]), MAMBA: PoolUsage(*pools[6:9])}


@st.composite
def batch_runs(draw, kv_columns):
    """A batch run: its steps, the pools before it and its full steps in offset order."""
    num_steps = draw(st.integers(1, 40))
    full_steps, offset = [], 0
    while offset < num_steps and draw(st.booleans()):
        offset += draw(st.integers(0, 5))
        if offset >= num_steps:
            break
        kind = draw(st.sampled_from(["pages", "event", "finishing"]))
        if kind == "pages":
            count = draw(st.integers(1, num_steps - offset))
            full_steps.append(FullStep(offset, draw(st.sampled_from([1, 2, 16, 64])), None, None, count))
            offset += count
        elif kind == "event":
            full_steps.append(FullStep(offset, 0, None, _usage(draw(POOLS))))
            offset += 1
        else:
            full_steps.append(FullStep(offset, 0, None, None))
            offset += 1
    return num_steps, list(draw(POOLS)), full_steps


@st.composite
def step_logs(draw):
    kv_columns = draw(st.sampled_from([(0,), (0, 3)]))
    pools = draw(st.sampled_from([POOLS, FULL_ONLY]))
    writes = [("row", draw(pools))]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["row", "plain", "batch"]))
        if kind == "row":
            writes.append(("row", draw(pools)))
        elif kind == "plain":
            writes.append(("plain", draw(st.integers(1, 30))))
        else:
            writes.append(("batch", draw(batch_runs(kv_columns))))
    return kv_columns, writes


def _written(kv_columns, writes) -> tuple[StepLog, list[array]]:
    """The log as the engine writes it, and its pool columns as the row-by-row reference makes them."""
    log, reference = StepLog(), [array("q") for _ in POOL_COLUMNS]
    for kind, what in writes:
        first = len(log)
        if kind == "row":
            log.append((first, 0.5, 0.25, 1, 7, 2), what)
            for column, value in zip(reference, what, strict=True):
                column.append(value)
        elif kind == "plain":
            log.extend_decode_only(first, [1.0] * what, [0.5] * what, 3)
            for column in reference:
                column.extend(array("q", (column[-1],)) * what)
        else:
            num_steps, pools, full_steps = what
            times = [1.0] * num_steps
            log.extend_batch_run(first, times, times, 3, pools, full_steps, kv_columns)
            for column, values in zip(
                reference, run_pool_columns(pools, full_steps, num_steps, kv_columns), strict=True
            ):
                column.extend(values)
    return log, reference


ZEROS = (5, 1, 2) + (0,) * 6


@pytest.mark.parametrize("zeros_unwritten", [True, False])
@settings(max_examples=250, deadline=None, derandomize=True)
@given(step_logs())
@example(((0,), [("row", ZEROS), ("plain", 4), ("row", ZEROS)]))
@example(((0, 3), [("row", ZEROS), ("batch", (6, list(ZEROS), [FullStep(1, 16, None, None, 3)]))]))
def test_the_pool_columns_are_the_row_by_row_reference(zeros_unwritten, log_writes):
    with mock.patch.object(pool_marks, "ZERO_COLUMNS_UNWRITTEN", zeros_unwritten):
        log, reference = _written(*log_writes)
        frame = log.frame()
    assert list(frame.columns) == list(STEP_COLUMNS + POOL_COLUMNS)
    for name, expected in zip(POOL_COLUMNS, reference, strict=True):
        assert frame[name].dtype == np.int64
        assert frame[name].tolist() == expected.tolist(), name


def test_an_event_step_at_a_runs_first_row_reads_its_own_pools():
    log = StepLog()
    log.append((0, 0.0, 1.0, 1, 5, 0), tuple(range(9)))
    before, after = [100, 0, 0, 50, 0, 0, 9, 9, 9], tuple(range(10, 19))
    full_steps = [FullStep(0, 0, None, _usage(after)), FullStep(1, 16, None, None, 3)]
    log.extend_batch_run(1, [1.0] * 5, [1.0] * 5, 2, before, full_steps, (0, 3))
    frame = log.frame()
    assert frame["full_free"].tolist() == [0, 10, 10 - 16, 10 - 32, 10 - 48, 10 - 48]
    assert frame["swa_running"].tolist() == [4, 14, 14 + 16, 14 + 32, 14 + 48, 14 + 48]
    assert frame["state_tree"].tolist() == [8, 18, 18, 18, 18, 18]
