"""The default loop's batch runs through a last output (``sim/sched/last_output.py``): the step that gives a running
request its last token, taken at the end of a batch run as the loop's full step takes it, leaves every table as step
by step (the full loop with the fast path off). Generated bursts on ``no-cache`` and ``marconi-vllm`` at pages
1/2/16/64, on the presets' pools and on pools tight enough that chunks stall and requests are retracted, bounds on
(the bounds' recorder listens to the steps as a batch reader, so runs go through last outputs too; with
``READ_BATCHES_THROUGH_LAST`` off, none does) and off; the runs count the last outputs they took, so the property is
not met by never taking one."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.simulate import SimConfig
from sim.sched import last_output
from sim.sched.last_output import LastOutputSteps
from sim.trace import Trace
from tests.fast_slow_helpers import assert_fast_equals_slow, burst_requests, growing_burst

_TAKE_RUN = LastOutputSteps.take_run

# the runs count through a patch of LastOutputSteps.take_run, which the compiled core would not see
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


@st.composite
def bursts(draw):
    """Requests arriving close together, and the knobs and pools of a default-loop run."""
    requests = burst_requests(draw, draw(st.integers(3, 10)), 3000, 400, 1500)
    page = draw(st.sampled_from([1, 2, 16, 64]))
    policy = draw(st.sampled_from(["no-cache", "marconi-vllm"]))
    knobs = dict(
        page_size=page,
        track_interval=page if policy == "marconi-vllm" else page * draw(st.integers(1, 8)),
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 64)),
        max_running_requests=draw(st.integers(1, 12)),
    )
    pool_tokens = draw(st.sampled_from([0, 6000, 12000, 40000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, draw(st.booleans())


def last_outputs_taken(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool) -> int:
    """The fast run's tables asserted equal to the step-by-step run's; the requests its runs' last steps ended."""
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}  # 0: the preset's own
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)
    ended = [0]

    def take_run(last_output: LastOutputSteps, *args):
        done, full_steps = _TAKE_RUN(last_output, *args)
        ended[0] += len(full_steps[-1].finished) if full_steps else 0
        return done, full_steps

    assert_fast_equals_slow(trace, config, LastOutputSteps, "take_run", take_run)
    return ended[0]


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(bursts())
def test_runs_through_last_outputs_equal_step_by_step(case):
    last_outputs_taken(*case)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(bursts())
def test_runs_through_last_outputs_equal_step_by_step_quick(case):
    last_outputs_taken(*case)


@pytest.mark.parametrize("page", [1, 2, 16, 64])
@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm"])
def test_a_growing_burst_ends_its_requests_in_runs(policy, page):
    """Requests of different lengths decoding together: most end in a batch run's last step, bounds off and on (the
    recorder a batch reader); none does with the bounds listening where ``READ_BATCHES_THROUGH_LAST`` is off, and
    the tables stay equal every way."""
    trace = Trace(growing_burst(6))
    knobs = dict(page_size=page, track_interval=page if policy == "marconi-vllm" else 64 * max(1, page // 16))
    assert last_outputs_taken(trace, policy, knobs, 0, bounds=False) >= 3
    assert last_outputs_taken(trace, policy, knobs, 0, bounds=True) >= 3
    with mock.patch.object(last_output, "READ_BATCHES_THROUGH_LAST", False):
        assert last_outputs_taken(trace, policy, knobs, 0, bounds=True) == 0


def test_tight_pools_with_retractions():
    """A no-cache burst on pools that stall chunks and retract requests: last outputs still end in runs."""
    trace = Trace(growing_burst(10))
    knobs = dict(page_size=16, track_interval=64, chunked_prefill_size=512, max_running_requests=8)
    assert last_outputs_taken(trace, "no-cache", knobs, 9000, bounds=False) >= 1
