"""A run of steps' numbers written into the step table as one int64 block (``sim/run/step_log.py``'s
``STEP_NUMBERS_IN_BULK``) leave every table as the reference, one Python int at a time.

Two logs fed the same rows and runs (step numbers anywhere in int64, runs of 0 to 300 steps) hold the same
columns, byte for byte, and the same frame; whole timed runs of every loop that writes runs (the default loop's
``no-cache`` and ``marconi-vllm``, FreeToken's, SGLang's ``radix``), bounds on and off, give the same tables with
the switch on and off, and the fixed bursts put a floor on how many runs of two steps or more went in bulk."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.run import step_log
from sim.run.simulate import SimConfig, simulate
from sim.run.step_log import STEP_COLUMNS, StepLog
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

POOLS = (7,) * 9
ROW = st.tuples(st.integers(0, 1 << 40), st.floats(0, 1e6), st.floats(0, 1.0), st.integers(0, 9))
RUN = st.tuples(st.integers(0, (1 << 62) - 400), st.integers(0, 300), st.integers(1, 64))
FEEDS = st.lists(st.one_of(ROW.map(lambda row: ("row", row)), RUN.map(lambda run: ("run", run))), max_size=12)


def _fed(feeds: list, in_bulk: bool) -> StepLog:
    log = StepLog()
    log.append((0, 0.0, 0.25, 1, 100, 0), POOLS)  # a run follows a full step's row, which reads the pools
    with mock.patch.object(step_log, "STEP_NUMBERS_IN_BULK", in_bulk):
        for kind, args in feeds:
            if kind == "row":
                step, start, duration, num_decode = args
                log.append((step, start, duration, 0, 0, num_decode), POOLS)
            else:
                first, count, num_decode = args
                starts = [first * 1e-6 + offset * 0.5 for offset in range(count)]
                log.extend_decode_only(first, starts, [0.5] * count, num_decode)
    return log


@settings(max_examples=200, deadline=None, derandomize=True)
@given(FEEDS)
@example([("run", (0, 0, 3)), ("row", (0, 0.0, 0.1, 2)), ("run", (1, 5, 2)), ("run", (6, 1, 2))])
@example([("row", (3, 1.0, 0.1, 1)), ("run", ((1 << 62) - 400, 300, 64))])
def test_a_runs_step_numbers_in_bulk_are_the_reference_column(feeds):
    bulk, reference = _fed(feeds, True), _fed(feeds, False)
    for name in STEP_COLUMNS:
        assert bulk.columns[name] == reference.columns[name], name
    assert len(bulk) == 1 + sum(args[1] if kind == "run" else 1 for kind, args in feeds)
    assert bulk.frame().equals(reference.frame())


def _counted_runs(trace: Trace, config: SimConfig) -> int:
    """The run with the switch on, asserted table by table equal to the run with it off; returns how many
    runs of two steps or more it wrote."""
    counts = {"runs": 0}
    extend = StepLog._extend_decodes

    def counting(log, first_step, starts, durations, num_decode):
        counts["runs"] += len(starts) >= 2
        return extend(log, first_step, starts, durations, num_decode)

    with mock.patch.object(StepLog, "_extend_decodes", autospec=True, side_effect=counting):
        bulk = simulate(trace, config)
    with mock.patch.object(step_log, "STEP_NUMBERS_IN_BULK", False):
        reference = simulate(trace, config)
    assert bulk.steps.equals(reference.steps)
    assert bulk.requests.equals(reference.requests)
    assert bulk.summary == reference.summary
    return counts["runs"]


@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm", "freetoken", "radix"])
def test_whole_runs_write_their_step_numbers_in_bulk(policy, page):
    knobs = dict(page_size=page, track_interval=64)
    for bounds in (False, True):
        config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds)
        assert _counted_runs(Trace(growing_burst(6)), config) >= 3
