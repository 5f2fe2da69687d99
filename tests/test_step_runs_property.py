"""The default loop's full steps taken in its own frame (``sim/run/step_runs.py``): a step that ends strictly
before the next scheduled event moves the SimPy clock itself (``IN_LOOP_FRAME``), priced from one pass over its
items that also counts its row (``SHAPE_ONCE``), and ``plain_decode_run`` answers "a chunk comes next" before it
lists the decoders (``chunk_ahead.ASKED_BEFORE_LISTING``).

The clock alone, on a bare SimPy environment: it lands where ``timeout(duration)`` would, and an event due before
or at the end (a tie: the event scheduled first runs first) or a NaN end leaves it to the timeout. Whole timed runs
with all three switches on against all three off: drawn sessions (follow-ups after a think time, zero included) on
the default loop's presets (``marconi-vllm`` among them), SGLang's and vLLM's, the roofline and a fixed step time
whose ends can tie with quarter-second arrivals, the fast path on and off; the steps taken in the frame and the
early answers are counted, so floors hold that the fast paths were reached, and each early answer is checked
against the reference's question."""

from __future__ import annotations

import math
from contextlib import ExitStack
from unittest import mock

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run import step_runs
from sim.run.backend import FixedStepBackend
from sim.run.simulate import SimConfig, simulate
from sim.sched import chunk_ahead, default
from sim.sched.default import DefaultScheduler
from sim.trace import Request, Segment, Trace
from tests.same_runs import assert_same_run

# the counts go through patches of names the loop binds, which the compiled core would not see
pytestmark = pytest.mark.interpreted

POLICIES = ["marconi-vllm", "radix", "sglang", "sglang-retain", "no-cache", "vllm", "freetoken"]
SWITCHES = ((step_runs, "IN_LOOP_FRAME"), (step_runs, "SHAPE_ONCE"), (chunk_ahead, "ASKED_BEFORE_LISTING"))


def _reference(stack: ExitStack) -> None:
    for module, name in SWITCHES:
        stack.enter_context(mock.patch.object(module, name, False))


def _landing(start: float, duration: float) -> float:
    env = simpy.Environment(start)

    def sleeper():
        yield env.timeout(duration)

    env.process(sleeper())
    env.run()
    return env.now


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(0, 1e4), st.floats(1e-9, 10), st.sampled_from(["before", "at", "after", "none"]))
def test_the_clock_lands_where_the_timeout_would(start, duration, other):
    end = _landing(start, duration)
    env = simpy.Environment(start)
    due = {"before": start + duration / 2, "at": end, "after": math.nextafter(end, math.inf)}.get(other)
    if due is not None and due >= start:
        env.timeout(due - start)
    moved = step_runs.clock_moved(env, duration)
    assert moved == (not env._queue or end < env.peek())
    assert env.now == (end if moved else start)
    if other in ("after", "none"):
        assert moved
    with mock.patch.object(step_runs, "IN_LOOP_FRAME", False):
        assert not step_runs.clock_moved(simpy.Environment(start), duration)


def test_nan_and_a_tie_are_left_to_the_timeout():
    env = simpy.Environment(1.5)
    assert not step_runs.clock_moved(env, float("nan")) and env.now == 1.5
    env.timeout(0.25)
    assert not step_runs.clock_moved(env, 0.25) and env.now == 1.5
    assert step_runs.clock_moved(env, 0.125) and env.now == 1.625


@st.composite
def sessions(draw) -> Trace:
    """Requests on quarter seconds (a fixed step's ends can tie with them), some following another's finish."""
    requests, arrival = [], 0.0
    for index in range(draw(st.integers(2, 10))):
        follows = draw(st.none() | st.integers(0, index - 1)) if index else None
        arrival += draw(st.integers(0, 3)) * 0.25
        requests.append(
            Request(
                id=f"r{index}",
                arrival=arrival,
                output_len=draw(st.integers(2, 60)),
                prompt=[Segment(ref=f"r{index}", len=draw(st.integers(1, 900)))],
                session=None if follows is None else "s",
                after=None if follows is None else f"r{follows}",
                think_time=0.0 if follows is None else draw(st.sampled_from([0.0, 0.25, 0.1])),
            )
        )
    return Trace(requests)


def _counted_run(trace: Trace, config: SimConfig, backend, fast: bool, counts: dict):
    """The run with the switches on, its steps in the frame and its early answers counted, each early answer
    checked against the reference's question (the switch off answers 0 too)."""
    moved, comes_next, plain = (
        step_runs.clock_moved,
        chunk_ahead.budget_left_by_decodes,
        DefaultScheduler.plain_decode_run,
    )

    def counting_moves(env, duration):
        counts["in frame"] += (answer := moved(env, duration))
        return answer

    def counting_answers(*args):
        counts["asked"] += (answer := comes_next(*args)) is not None
        return answer

    def checked_plain_run(scheduler, iteration):
        asked = counts["asked"]
        answer = plain(scheduler, iteration)
        if counts["asked"] > asked and not answer[1]:  # asked early, and 0 (a yes answers 0)
            counts["early"] += 1
            with mock.patch.object(chunk_ahead, "ASKED_BEFORE_LISTING", False):
                assert plain(scheduler, iteration)[1] == 0, "an early answer lost fast steps"
        return answer

    with (
        mock.patch("sim.run.engine.clock_moved", side_effect=counting_moves),
        mock.patch.object(default, "budget_left_by_decodes", side_effect=counting_answers),
        mock.patch.object(DefaultScheduler, "plain_decode_run", autospec=True, side_effect=checked_plain_run),
    ):
        return simulate(trace, config, backend=backend, fast_path=fast)


def _same_both_ways(trace: Trace, config: SimConfig, fixed: bool, fast: bool) -> dict:
    counts = {"in frame": 0, "asked": 0, "early": 0}
    backend = (lambda: FixedStepBackend(0.25, 0.0)) if fixed else (lambda: None)
    taken = _counted_run(trace, config, backend(), fast, counts)
    with ExitStack() as stack:
        _reference(stack)
        reference = simulate(trace, config, backend=backend(), fast_path=fast)
    assert_same_run(taken, reference)
    return counts


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sessions(), st.sampled_from(POLICIES), st.booleans(), st.booleans())
def test_whole_runs_are_the_same_with_steps_in_the_frame(trace, policy, fixed, fast):
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), mode="timed")
    try:
        _same_both_ways(trace, config, fixed, fast)
    except ValueError:
        return  # a trace the engine refuses (an order of sessions it cannot follow)


def _burst(count: int) -> Trace:
    return Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i * 0.3,
                output_len=40 + 7 * i,
                prompt=[Segment(ref=f"r{i}", len=300 + 90 * i)],
            )
            for i in range(count)
        ]
    )


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("bounds", [False, True])
def test_steps_are_taken_in_the_frame(policy, bounds):
    """A burst's steps mostly end before the next arrival: taken in the frame, the run the reference's."""
    config = SimConfig(policy=policy, model="inkling", knobs=dict(page_size=16), mode="timed", bounds=bounds)
    counts = _same_both_ways(_burst(12), config, fixed=False, fast=True)
    assert counts["in frame"] >= 10


def test_marconi_vllm_prefill_steps_answer_early():
    """``marconi-vllm`` at page 16: long prompts prefill a page chunk a step beside the earlier ones' decodes, so
    the early answer fires, and most steps are taken in the frame."""
    trace = Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i / 20,
                output_len=300 + 37 * i,
                prompt=[Segment(ref=f"r{i}", len=1500 + 211 * i)],
            )
            for i in range(8)
        ]
    )
    knobs = dict(page_size=16, track_interval=16, chunked_prefill_size=64, max_running_requests=8)
    config = SimConfig(policy="marconi-vllm", model="inkling", knobs=knobs, mode="timed")
    counts = _same_both_ways(trace, config, fixed=False, fast=True)
    assert counts["early"] >= 100 and counts["in frame"] >= 300
