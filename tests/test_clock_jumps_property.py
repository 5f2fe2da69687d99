"""The engine moves the SimPy clock itself over steps that end before anything else is scheduled
(``event_delays.CLOCK_JUMPS``, ``clock_jumped``): the clock lands where the steps' timeouts would, and whole timed
runs make the same tables with the switch on and off.

The jump alone: on a bare SimPy environment, against the timeouts it replaces, with an event scheduled before,
at (a tie: the event scheduled first runs first, so no jump) and after the end, NaN and several delays. Whole runs:
drawn bursts with sessions (follow-ups after a think time, zero included) on every loop kind, the simulator's
roofline and a fixed step time whose ends can fall exactly on arrivals (quarter seconds), the fast path on and
off; the jumps taken counted, so a floor holds the fast path reached."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run import event_delays
from sim.run.backend import FixedStepBackend
from sim.run.event_delays import clock_jumped
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace
from tests.same_runs import assert_same_run

# the counts go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

LOOP_POLICIES = ["radix", "sglang", "marconi-sglang", "sglang-retain", "no-cache", "vllm", "freetoken"]


def _landing(start: float, delays: list[float]) -> float:
    """Where the timeouts land, yielded one after another on a bare environment."""
    env = simpy.Environment(start)

    def sleeper():
        for delay in delays:
            yield env.timeout(delay)

    env.process(sleeper())
    env.run()
    return env.now


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.floats(0, 1e4),
    st.lists(st.floats(1e-9, 10), min_size=1, max_size=5),
    st.sampled_from(["before", "at", "after", "none"]),
)
def test_the_clock_lands_where_the_timeouts_would(start, delays, other):
    end = _landing(start, delays)
    env = simpy.Environment(start)
    at = {"before": start + delays[0] / 2, "at": end, "after": math.nextafter(end, math.inf)}.get(other)
    if at is not None and at >= start:
        env.timeout(at - start)
    jumped = clock_jumped(env, delays)
    assert jumped == (not env._queue or end < env.peek())
    assert env.now == (end if jumped else start)
    if other in ("after", "none"):
        assert jumped
    with mock.patch.object(event_delays, "CLOCK_JUMPS", False):
        assert not clock_jumped(simpy.Environment(start), delays)


def test_nan_and_a_tie_are_left_to_the_timeouts():
    env = simpy.Environment(1.5)
    assert not clock_jumped(env, [float("nan")]) and env.now == 1.5
    env.timeout(0.25)
    assert not clock_jumped(env, [0.125, 0.125]) and env.now == 1.5
    assert clock_jumped(env, [0.125]) and env.now == 1.625


@st.composite
def sessions(draw) -> Trace:
    """Requests arriving on quarter seconds (a fixed step's ends can tie with them), some following another
    request's finish after a think time (zero too)."""
    count = draw(st.integers(2, 10))
    requests, arrival = [], 0.0
    for index in range(count):
        prompt, output = draw(st.integers(1, 900)), draw(st.integers(2, 60))
        follows = draw(st.none() | st.integers(0, index - 1)) if index else None
        arrival += draw(st.integers(0, 3)) * 0.25  # open-loop requests come in arrival order
        requests.append(
            Request(
                id=f"r{index}",
                arrival=arrival,
                output_len=output,
                prompt=[Segment(ref=f"r{index}", len=prompt)],
                session=None if follows is None else "s",
                after=None if follows is None else f"r{follows}",
                think_time=0.0 if follows is None else draw(st.sampled_from([0.0, 0.25, 0.1])),
            )
        )
    return Trace(requests)


def _run(trace: Trace, config: SimConfig, fixed: bool, fast: bool):
    backend = FixedStepBackend(0.25, 0.0) if fixed else None
    return simulate(trace, config, backend=backend, fast_path=fast)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sessions(), st.sampled_from(LOOP_POLICIES), st.booleans(), st.booleans())
def test_whole_runs_are_the_same_with_the_clock_jumping(trace, policy, fixed, fast):
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), mode="timed")
    try:
        jumping = _run(trace, config, fixed, fast)
    except ValueError:
        return  # a trace the engine refuses (an order of sessions it cannot follow)
    with mock.patch.object(event_delays, "CLOCK_JUMPS", False):
        reference = _run(trace, config, fixed, fast)
    assert_same_run(jumping, reference)


@pytest.mark.parametrize("policy", LOOP_POLICIES)
def test_the_jumps_are_taken(policy):
    """A burst's steps mostly end before the next arrival: the jumps are taken, and the run is the reference's."""
    trace = Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i * 0.3,
                output_len=40 + 7 * i,
                prompt=[Segment(ref=f"r{i}", len=300 + 90 * i)],
            )
            for i in range(12)
        ]
    )
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), mode="timed")
    taken = {"jumps": 0}

    def counting(env, delays):
        jumped = clock_jumped(env, delays)
        taken["jumps"] += jumped
        return jumped

    with mock.patch("sim.run.engine.clock_jumped", side_effect=counting):
        jumping = simulate(trace, config)
    with mock.patch.object(event_delays, "CLOCK_JUMPS", False):
        reference = simulate(trace, config)
    assert_same_run(jumping, reference)
    assert taken["jumps"] >= 10
