"""Batch decode runs of FreeToken's loop and the default loop (``sim/sched/loop_runs.py``): the running requests'
decode steps that start pages, free SWA and take checkpoints, taken in one event, leave every table as step by
step (the full loop with the fast path off), bounds included. Generated bursts on pools small enough that runs
stop for room, evict and (the default loop) retract around them, on FreeToken's presets and the default loop's
(``no-cache``, ``marconi-vllm``) at several page sizes, bounds on and off (off: consecutive page-starting steps
go to the step log as column blocks, ``page_step_runs``); each run counts the full steps its batch runs took, and
how many went as runs of several, so the property is not met by never taking one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.engine import Engine
from sim.run.simulate import SimConfig
from sim.trace import Trace
from tests.fast_slow_helpers import assert_fast_equals_slow, burst_requests, growing_burst

_RECORD_BATCH_RUN = Engine._record_batch_run
# these tests patch the engine's methods, which the compiled core (its engine compiled) takes no patch of
pytestmark = pytest.mark.interpreted

FREETOKEN = ["freetoken", "freetoken-lazy", "freetoken-budget"]


@st.composite
def bursts(draw):
    """Requests arriving close together, and the run's knobs (FreeToken's or the default loop's)."""
    num_requests = draw(st.integers(3, 12))
    requests = burst_requests(draw, num_requests, 2500, 900, 400)
    policy = draw(st.sampled_from(FREETOKEN + ["no-cache", "marconi-vllm"]))
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs: dict = dict(page_size=page, max_running_requests=draw(st.integers(2, 12)))
    if policy != "marconi-vllm":
        knobs.update(
            track_interval=64 * draw(st.integers(1, 4)),
            swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
            swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])),
            chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
        )
    else:  # vLLM+: a state at every page, the track interval a multiple of it
        knobs.update(track_interval=max(page, 16) * 4)
    if policy in FREETOKEN:
        knobs.update(overlap=draw(st.booleans()))
    pool_tokens = draw(st.sampled_from([3000, 6000, 12000, 40000]))
    # vLLM+ holds a state per page in the tree: a few dozen states starve its admissions
    mamba_states = draw(st.sampled_from([48, 400] if policy == "marconi-vllm" else [48]))
    bounds = draw(st.booleans())
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, mamba_states, bounds


def run_both(
    trace: Trace, policy: str, knobs: dict, pool_tokens: int, mamba_states: int = 48, bounds: bool = True
) -> int:
    """Fast and step-by-step runs of the trace, asserted equal (bounds included where on); the full steps the
    fast run's batch runs took (a run of page-starting steps counts each)."""
    config = SimConfig(
        policy=policy,
        model="inkling",
        knobs=knobs,
        pool_tokens=pool_tokens,
        mamba_states=mamba_states,
        bounds=bounds,
    )
    full_steps = [0]

    def record_batch_run(engine: Engine, runs, starts, durations, steps, pools) -> None:
        full_steps[0] += sum(step.num_steps for step in steps)
        TOTALS["merged_steps"] += sum(step.num_steps for step in steps if step.num_steps > 1)
        _RECORD_BATCH_RUN(engine, runs, starts, durations, steps, pools)

    assert_fast_equals_slow(trace, config, Engine, "_record_batch_run", record_batch_run)
    return full_steps[0]


TOTALS = {"runs": 0, "full_steps": 0, "merged_steps": 0}


@settings(max_examples=50, deadline=None, derandomize=True)
@given(bursts())
def test_loop_batch_runs_change_no_table(burst):
    TOTALS["runs"] += 1
    TOTALS["full_steps"] += run_both(*burst)


# the property runs once, inside the test below (which also asserts what its examples reach): collected
# on its own too, it ran its examples twice wherever pytest-xdist put the two tests on different workers
test_loop_batch_runs_change_no_table.__test__ = False


def test_the_generated_runs_take_full_steps_in_batch_runs():
    """The property above is exercised: its batch runs took steps the loops take in full."""
    test_loop_batch_runs_change_no_table()
    assert TOTALS["full_steps"] > 2000, TOTALS
    # page-starting steps handed on as runs of several: 902 in the examples tests/hypothesis_pins.py fixes (alone
    # and in the suite alike; 1,000+ had depended on what else the process imported)
    assert TOTALS["merged_steps"] > 700, TOTALS


def test_freetoken_at_page_1_takes_its_steps_in_batch_runs_with_requests_waiting():
    """Four table rows for ten requests: the others wait, and each step's prefill pass adds nothing."""
    assert run_both(Trace(growing_burst(10)), "freetoken", dict(max_running_requests=4), 20000) > 1000


def test_freetoken_at_page_1_hands_its_page_steps_on_as_column_blocks_without_bounds():
    """Bounds off: nothing reads a page step's batch, so every stretch's steps go to the step log as runs."""
    before = TOTALS["merged_steps"]
    assert (
        run_both(Trace(growing_burst(10)), "freetoken-budget", dict(max_running_requests=4), 20000, bounds=False)
        > 1000
    )
    assert TOTALS["merged_steps"] - before > 1000


def test_freetoken_on_tight_pools_stops_its_runs_for_room_and_still_matches():
    assert run_both(Trace(growing_burst(8)), "freetoken-lazy", dict(max_running_requests=8), 9000) > 500


def test_the_default_loop_takes_batch_runs_at_page_64_and_page_32():
    assert run_both(Trace(growing_burst(8)), "no-cache", dict(page_size=64), 12000) > 50
    assert run_both(Trace(growing_burst(8)), "marconi-vllm", {}, 20000, 400) > 50


def test_the_default_loop_on_tight_pools_stops_its_runs_for_room_and_still_matches():
    """vLLM+ on pools its ten requests overrun: a run whose event step might find no page stops before it (the
    loop evicts or retracts there). Its full steps are the page-starting ones: a state taken at a page no
    longer makes every later decode step one (s8-mvllm's ``plain_decode_steps``)."""
    assert run_both(Trace(growing_burst(10)), "marconi-vllm", dict(max_running_requests=8), 6000, 400) > 100
