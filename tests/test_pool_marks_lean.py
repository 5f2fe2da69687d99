"""A batch run's pool marks gathered at once (``step_log.RUN_MARKS_AT_ONCE``) and the pool columns made by repeats
(``pool_marks.COLUMNS_BY_REPEAT``) are the references': logs written the same full rows, plain runs and batch runs
(page-starting stretches, event steps, an event step at a run's first row, SWA frees, finishing steps; one KV pool
or two) hold the same marks and moves entry by entry, and make the same pool columns with either switch on or off;
whole timed runs give the same tables and summary."""

from __future__ import annotations

from contextlib import ExitStack
from itertools import product
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.pools import PoolUsage
from sim.run import pool_marks, step_log
from sim.run.metrics import POOL_COLUMNS
from sim.run.simulate import SimConfig, simulate
from sim.run.step_log import StepLog
from sim.sched.batch import FullStep
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

POOLS = st.tuples(*[st.integers(0, 5000)] * len(POOL_COLUMNS))
ZEROS_BUT_FULL = st.tuples(*[st.integers(0, 5000)] * 3, *[st.just(0)] * 6)  # no SWA or Mamba pools
SWITCHES = ((step_log, "RUN_MARKS_AT_ONCE"), (pool_marks, "COLUMNS_BY_REPEAT"))


def _usage(pools: tuple[int, ...]) -> dict:
    return {FULL: PoolUsage(*pools[0:3]), SWA: PoolUsage(*pools[3:6]), MAMBA: PoolUsage(*pools[6:9])}


@st.composite
def full_steps_of(draw, num_steps: int, pools) -> list[FullStep]:
    """A batch run's full steps in offset order, any of them maybe freeing SWA pages, the first maybe at 0."""
    steps: list[FullStep] = []
    offset = draw(st.integers(0, 3))
    while offset < num_steps and draw(st.integers(0, 4)):
        kind = draw(st.sampled_from(["pages", "event", "finishing"]))
        freed = draw(st.sampled_from([0, 0, 1, 3]))
        count = draw(st.integers(1, num_steps - offset)) if kind == "pages" and not freed else 1
        pages = draw(st.sampled_from([1, 2, 16, 64])) if kind == "pages" else 0
        usage = _usage(draw(pools)) if kind == "event" else None
        steps.append(FullStep(offset, pages, None, usage, count, swa_freed=freed))
        offset += count + draw(st.integers(0, 4))
    return steps


@st.composite
def log_writes(draw):
    kv_columns = draw(st.sampled_from([(0,), (0, 3)]))
    pools = draw(st.sampled_from([POOLS, ZEROS_BUT_FULL]))
    writes: list[tuple] = [("row", draw(pools))]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["row", "plain", "batch", "batch"]))
        if kind == "row":
            writes.append(("row", draw(pools)))
        elif kind == "plain":
            writes.append(("plain", draw(st.integers(1, 30))))
        else:
            num_steps = draw(st.integers(1, 40))
            writes.append(("batch", (num_steps, list(draw(pools)), draw(full_steps_of(num_steps, pools)))))
    return kv_columns, writes


def _written(kv_columns, writes, on: tuple[bool, bool]) -> tuple[list[list[int]], list[np.ndarray]]:
    """The marks' and moves' arrays of a log written with the switches as ``on``, and its pool columns."""
    with ExitStack() as stack:
        for (module, name), value in zip(SWITCHES, on, strict=True):
            stack.enter_context(mock.patch.object(module, name, value))
        log = StepLog()
        for kind, what in writes:
            first = len(log)
            if kind == "row":
                log.append((first, 0.5, 0.25, 1, 7, 2), what)
            elif kind == "plain":
                log.extend_decode_only(first, [1.0] * what, [0.5] * what, 3)
            else:
                num_steps, pools, full_steps = what
                times = [1.0] * num_steps
                log.extend_batch_run(first, times, times, 3, pools, full_steps, kv_columns)
        marks = log.pools
        held = [marks.mark_rows, marks.mark_values, *marks.move_columns()]
        return [list(values) for values in held], marks.columns(len(log))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(log_writes())
@example(
    (
        (0, 3),
        [("row", (5, 1, 2) + (0,) * 6), ("batch", (4, [9] * 9, [FullStep(0, 0, None, _usage((1,) * 9))]))],
    )
)
@example(
    ((0, 3), [("row", (9,) * 9), ("batch", (5, [9] * 9, [FullStep(1, 16, None, None, 1, swa_freed=2)]))])
)
def test_the_lean_marks_and_columns_are_the_references(writes):
    held, reference = _written(*writes, (False, False))
    for on in product((False, True), repeat=2):
        lean_held, columns = _written(*writes, on)
        assert lean_held == held, on
        for name, made, expected in zip(POOL_COLUMNS, columns, reference, strict=True):
            assert made.dtype == np.int64 and made.tolist() == expected.tolist(), (on, name)


def test_a_second_mark_at_row_0_reads_no_moves_before_it():
    full_steps = [FullStep(0, 0, None, _usage(tuple(range(10, 19)))), FullStep(1, 2, None, None, 3)]
    writes = [("batch", (5, [50] * 9, full_steps))]
    for on in product((False, True), repeat=2):
        columns = _written((0, 3), writes, on)[1]
        assert columns[0].tolist() == [10, 8, 6, 4, 4] and columns[4].tolist() == [14, 16, 18, 20, 20], on


@pytest.mark.parametrize("policy", ["radix", "sglang", "no-cache", "marconi-sglang"])
def test_whole_runs_make_the_same_tables_lean(policy):
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), bounds=False)
    trace = Trace(growing_burst(6))
    lean = simulate(trace, config)
    with ExitStack() as stack:
        for module, name in SWITCHES:
            stack.enter_context(mock.patch.object(module, name, False))
        reference = simulate(trace, config)
    assert_same_run(lean, reference)
    assert len(lean.steps) > 50
