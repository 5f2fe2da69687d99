"""The timed loop's delays over a run of steps from the run's last start (``event_delays``'s ``last_start``,
switch ``DELAYS_FROM_LAST_START``) are the reference's, which sums the run's ends again.

For any clock and durations, the starts a decode run hands over (``steps_before``: each the previous start plus
its duration, from the clock) give the same delays with the switch on and off, including where rounding makes
the last end unreachable in one jump (then the reference's search runs); whole timed runs give the same tables
with the switch on and off, and each run's own calls put a floor on the jumps taken from the last start."""

from __future__ import annotations

import math
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.cost.decode_run import steps_before
from sim.run import event_delays as delays_module
from sim.run.event_delays import event_delays
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted


def _both(now: float, durations: list[float]) -> tuple[list[float], list[float]]:
    starts, taken = steps_before(durations, now, math.inf, len(durations))
    assert taken == durations
    with mock.patch.object(delays_module, "DELAYS_FROM_LAST_START", False):
        reference = event_delays(now, durations, starts[-1])
    return event_delays(now, durations, starts[-1]), reference


@settings(max_examples=2000, deadline=None, derandomize=True)
@given(
    st.floats(0, 1e7, allow_nan=False),
    st.lists(st.floats(1e-9, 10.0, allow_nan=False), min_size=1, max_size=50),
)
@example(1.00001, [0.6, 4.0])  # no single delay lands on the last end: the reference's search
@example(1.0, [0.5, 0.25, 0.125])
@example(3.0, [0.1])  # one step: its own duration, as the reference
@example(1e7, [1e-9] * 40)
def test_the_delays_from_the_last_start_are_the_reference(now, durations):
    fast, reference = _both(now, durations)
    assert fast == reference
    assert all(type(delay) is float for delay in fast)


def test_the_fixed_cases_take_both_branches():
    landed = []
    landing = delays_module.delay_landing_on

    def counting(now, end):
        delay = landing(now, end)
        landed.append(delay is not None)
        return delay

    for now, durations, expected in ((1.0, [0.5, 0.25, 0.125], [0.875]), (1.00001, [0.6, 4.0], None)):
        reference = _both(now, durations)[1]
        starts = steps_before(durations, now, math.inf, len(durations))[0]
        with mock.patch.object(delays_module, "delay_landing_on", side_effect=counting):
            assert event_delays(now, durations, starts[-1]) == reference == (expected or reference)
    # one jump from the last start, the ends not summed; then a jump that missed, and the reference's search
    assert landed[0] is True and landed[1] is False and len(landed) > 2
    assert reference[-1] == 4.0


def _jumps_from_last_start(trace: Trace, config: SimConfig) -> int:
    """The run with the switch on, asserted equal to the run with it off; returns how many of its runs of two
    steps or more jumped from their last start."""
    counts = {"jumps": 0}

    def counting(now, durations, last_start=None):
        delays = event_delays(now, durations, last_start)
        counts["jumps"] += last_start is not None and len(durations) > 1 and len(delays) == 1
        return delays

    with mock.patch("sim.run.engine.event_delays", side_effect=counting):
        fast = simulate(trace, config)
    with mock.patch.object(delays_module, "DELAYS_FROM_LAST_START", False):
        reference = simulate(trace, config)
    assert_same_run(fast, reference)
    return counts["jumps"]


@pytest.mark.parametrize("policy", ["radix", "sglang", "marconi-sglang", "no-cache", "freetoken", "marconi-vllm"])
def test_whole_runs_are_the_reference(policy):
    for page, bounds in ((1, False), (16, True)):
        config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=page, track_interval=64), bounds=bounds)
        assert _jumps_from_last_start(Trace(growing_burst(6)), config) >= 3
