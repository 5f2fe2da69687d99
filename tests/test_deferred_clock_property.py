"""A full step's timeout deferred while nothing reads the clock (``sim/run/deferred_clock.py``) against the
reference, a timeout per step (``DEFER_STEP_TIMEOUTS`` off).

Whole timed runs: generated open-loop bursts with closed-loop follow-ups (think times of 0 to 60 ms, so a
finish queues an event inside the span a run of steps would skip), every engine loop (the default loop's
presets, SGLang's, vLLM's, FreeToken's), the presets' pools and tight ones (refusals, parks, requests given
up on), bounds on and off, progress reported or not: the request and step tables, the summary and the
progress calls equal with the switch on and off. Each run counts the steps it deferred and the catch-ups
that jumped over two or more, so the property is not met by never deferring. Fixed runs pin the floors: a
fixed-step backend whose step ends tie arrivals exactly (the tie must not be deferred: the arrival runs
first), and the clock's landing on sums that a single delay from the start does not reach.
"""

from __future__ import annotations

from unittest import mock

import pytest
import simpy
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.run import deferred_clock
from sim.run.backend import FixedStepBackend
from sim.run.deferred_clock import DeferredClock
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import burst_requests

_DEFERS = DeferredClock.defers
_CATCH_UP = DeferredClock.catch_up

# the counts go through patches of the clock's methods, which the compiled core would not see
pytestmark = pytest.mark.interpreted

POLICIES = ["no-cache", "radix", "marconi-vllm", "marconi", "sglang", "sglang-retain", "vllm", "freetoken"]


def with_follow_ups(requests: list[Request], think_ms: list[int]) -> list[Request]:
    """Each request after the first few sent ``think_ms`` after an earlier one finishes (closed loop)."""
    out = list(requests[:2])
    for index, request in enumerate(requests[2:], start=2):
        think = think_ms[index % len(think_ms)]
        after = requests[index // 2].id
        out.append(
            Request(
                id=request.id,
                after=after,
                think_time=think / 1000,
                output_len=request.output_len,
                prompt=request.prompt,
            )
        )
    return out


@st.composite
def runs(draw):
    requests = sorted(burst_requests(draw, draw(st.integers(4, 10)), 2500, 300, 400), key=lambda r: r.arrival)
    if draw(st.booleans()):
        requests = with_follow_ups(requests, draw(st.lists(st.integers(0, 60), min_size=1, max_size=3)))
    policy = draw(st.sampled_from(POLICIES))
    page = 16 if policy == "vllm" else draw(st.sampled_from([1, 16, 32]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 16)),
        max_running_requests=draw(st.integers(2, 8)),
    )
    if policy == "marconi-vllm":
        knobs["track_interval"] = page  # vLLM+ keeps a state at every page
    pool_tokens = draw(st.sampled_from([0, 3000, 6000]))
    return Trace(requests), policy, knobs, pool_tokens, draw(st.booleans()), draw(st.booleans())


def counted_run(trace, config, on: bool, progress: bool, backend=None):
    """One timed run with the switch as given: its result, its progress calls, the steps it deferred and the
    catch-ups that moved over two or more."""
    counts = {"deferred": 0, "jumps": 0}
    calls: list[int] = []

    def defers(clock, started_at, duration):
        deferred = _DEFERS(clock, started_at, duration)
        counts["deferred"] += deferred
        return deferred

    def catch_up(clock):
        counts["jumps"] += len(clock.pending_durations) > 1
        return _CATCH_UP(clock)

    with (
        mock.patch.object(deferred_clock, "DEFER_STEP_TIMEOUTS", on),
        mock.patch.object(DeferredClock, "defers", autospec=True, side_effect=defers),
        mock.patch.object(DeferredClock, "catch_up", autospec=True, side_effect=catch_up),
    ):
        result = simulate(trace, config, backend=backend, on_step=calls.append if progress else None)
    return result, calls, counts


def assert_equal_runs(trace, config, progress: bool = False, backend_of=None) -> dict[str, int]:
    """The switch on against off: tables, summary and progress calls equal; the on run's counts."""
    fast, fast_calls, counts = counted_run(trace, config, True, progress, backend_of and backend_of())
    slow, slow_calls, slow_counts = counted_run(trace, config, False, progress, backend_of and backend_of())
    assert slow_counts["deferred"] == 0
    assert fast.requests.equals(slow.requests)
    assert fast.steps.equals(slow.steps)
    assert fast.summary == slow.summary
    assert fast_calls == slow_calls
    return counts


def _equal(trace, policy, knobs, pool_tokens, bounds, progress) -> dict[str, int]:
    pools = dict(pool_tokens=pool_tokens, mamba_states=32) if pool_tokens else {}  # 0: the preset's own
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)
    return assert_equal_runs(trace, config, progress)


def _long_prompts(num_requests: int, gap_s: float) -> list[Request]:
    return [
        Request(
            id=f"r{index}",
            arrival=index * gap_s,
            output_len=40 + 17 * index,
            prompt=[Segment(ref=f"r{index}", len=900 + 173 * index)],
        )
        for index in range(num_requests)
    ]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(runs())
@example(
    (
        Trace(_long_prompts(5, 0.02)),
        "marconi-vllm",
        dict(page_size=32, track_interval=32, chunked_prefill_size=128, max_running_requests=4),
        3000,
        False,
        True,
    )
)
def test_deferred_steps_equal_a_timeout_per_step(run):
    _equal(*run)


def test_generated_runs_defer_and_jump():
    """The property on twelve of its cases, not met vacuously: most runs defer steps, some catch up in jumps."""
    counts = []

    @settings(max_examples=12, deadline=None, derandomize=True)
    @given(runs())
    def count(run):
        counts.append(_equal(*run))

    count()
    assert sum(1 for c in counts if c["deferred"] > 0) >= len(counts) // 2
    assert sum(1 for c in counts if c["jumps"] > 0) >= len(counts) // 4


@pytest.mark.parametrize("policy", ["marconi-vllm", "no-cache", "sglang", "vllm"])
def test_long_prompts_with_follow_ups_defer_many_steps(policy: str):
    """Prompts prefilling in chunks beside decodes, each later one sent 5 ms after an earlier finishes, with
    hundreds of steps deferred, jumps of two or more."""
    requests = with_follow_ups(_long_prompts(8, 0.03), [5, 0, 13])
    knobs = dict(page_size=16, chunked_prefill_size=64, max_running_requests=4)
    if policy == "marconi-vllm":
        knobs["track_interval"] = 16
    counts = assert_equal_runs(Trace(requests), SimConfig(policy=policy, model="inkling", knobs=knobs))
    assert counts["deferred"] > 100 and counts["jumps"] > 5


def test_a_step_ending_on_an_arrival_is_not_deferred():
    """A fixed 1/8 s step, arrivals on whole seconds: step ends tie arrivals exactly. At a tie the arrival runs
    first (queued earlier), so the next step sees its request: the step must take its own timeout."""
    requests = [
        Request(
            id=f"r{index}",
            arrival=float(index),
            output_len=30,
            prompt=[Segment(ref=f"r{index}", len=200 + 40 * index)],
        )
        for index in range(6)
    ]
    config = SimConfig(policy="no-cache", model="inkling", knobs=dict(chunked_prefill_size=64))
    counts = assert_equal_runs(Trace(requests), config, False, lambda: FixedStepBackend(0.125))
    assert counts["deferred"] > 20


def test_the_clock_lands_where_step_after_step_would():
    """Durations whose running sum a single delay from the start misses (0.1 + 0.2 + ...): the catch-up lands on
    the sum step after step reaches, and a step is refused where it ends on the next queued event."""
    durations = [0.1, 0.2, 0.3, 0.7, 1e-9, 0.1] * 5
    stepwise = simpy.Environment()

    def steps():
        for duration in durations:
            yield stepwise.timeout(duration)

    stepwise.process(steps())
    stepwise.run()
    env = simpy.Environment()
    clock = DeferredClock(env)
    env.timeout(100.0)  # an event far ahead: every step is deferred
    for duration in durations:
        assert clock.defers(clock.now(), duration)
    assert clock.now() == stepwise.now  # the pending steps' end, before the clock moves
    env.run(until=env.process(clock.catch_up()))
    assert env.now == stepwise.now and not clock.pending_durations
    tie = simpy.Environment()
    tie.timeout(0.5)
    assert not DeferredClock(tie).defers(0.25, 0.25)


@pytest.mark.parametrize("mamba_states", [8, 9])
def test_requests_given_up_on_after_deferred_steps(mamba_states: int):
    """``marconi-vllm`` on a few MAMBA states: each request, prefilled page by page beside nothing, is retracted
    twice while running alone and given up on: its rejection (and its follow-up's sending) reads the clock
    the deferred steps before it must have moved."""
    requests = with_follow_ups(
        [
            Request(
                id=f"r{index}",
                arrival=index * 0.5,
                output_len=900,
                prompt=[Segment(ref=f"r{index}", len=400 + 50 * index)],
            )
            for index in range(5)
        ],
        [3],
    )
    knobs = dict(page_size=16, track_interval=16, chunked_prefill_size=64)
    config = SimConfig(
        policy="marconi-vllm", model="inkling", knobs=knobs, pool_tokens=1500, mamba_states=mamba_states
    )
    counts = assert_equal_runs(Trace(requests), config)
    given_up = simulate(Trace(requests), config).requests["rejected"].str.contains("retracted twice")
    assert counts["deferred"] > 10 and given_up.sum() >= 2
