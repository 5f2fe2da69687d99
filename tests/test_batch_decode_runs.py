"""The SGLang loop's batch decode runs (``sim/sched/sglang_runs.py``): the running batch's decode steps that start
pages, take checkpoints and fire SWA frees, taken in one event, leave every table as step by step (the full loop
with the fast path off), with and without bounds (the bounds read each full step's batch; without them a run of
page-starting steps is one ``FullStep`` whose rows are column blocks). Generated bursts on pools small enough that runs stop for room, evict
and retract around them, on the presets of SGLang's loop; each run also counts the full steps its batch runs
took (page starts and event steps), so the property is not met by never taking one."""

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


@st.composite
def bursts(draw):
    """Requests arriving close together (prompt and output lengths, arrival), and the run's knobs."""
    num_requests = draw(st.integers(3, 12))
    requests = burst_requests(draw, num_requests, 2500, 900, 400)
    policy = draw(st.sampled_from(["sglang", "sglang-retain", "sglang-retain-tree", "marconi-sglang"]))
    page = 1 if policy == "marconi-sglang" else draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        track_interval=max(page, 16) * draw(st.integers(1, 8)),
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
        max_running_requests=draw(st.integers(2, 12)),
        swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
        swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])),
        overlap=draw(st.booleans()),
        schedule_policy=draw(st.sampled_from(["fcfs", "lpm", "hrrn"])),
        mixed_chunk=draw(st.booleans()),
    )
    pool_tokens = draw(st.sampled_from([3000, 6000, 12000, 40000]))
    # Marconi's one byte budget (KV and states weighed together), about 4k to 30k tokens of KV
    cache_bytes = draw(st.sampled_from([None, 1.5e8, 4e8, 1e9])) if policy == "marconi-sglang" else None
    bounds = draw(st.booleans())
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, cache_bytes, bounds


def run_both(
    trace: Trace,
    policy: str,
    knobs: dict,
    pool_tokens: int,
    cache_bytes: float | None = None,
    bounds: bool = True,
) -> int:
    """Fast and step-by-step runs of the trace, asserted equal; the full steps the fast run's batch runs took."""
    config = SimConfig(
        policy=policy,
        model="inkling",
        knobs=knobs,
        pool_tokens=pool_tokens,
        mamba_states=48,
        cache_bytes=cache_bytes,
        bounds=bounds,
    )
    full_steps = [0]

    def record_batch_run(engine: Engine, runs, starts, durations, steps, pools) -> None:
        full_steps[0] += sum(step.num_steps for step in steps)
        _RECORD_BATCH_RUN(engine, runs, starts, durations, steps, pools)

    assert_fast_equals_slow(trace, config, Engine, "_record_batch_run", record_batch_run)
    return full_steps[0]


TOTALS = {"runs": 0, "full_steps": 0}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
def test_batch_decode_runs_change_no_table(burst):
    TOTALS["runs"] += 1
    TOTALS["full_steps"] += run_both(*burst)


# the property runs once, inside the test below (which also asserts what its examples reach): collected
# on its own too, it ran its examples twice wherever pytest-xdist put the two tests on different workers
test_batch_decode_runs_change_no_table.__test__ = False


def test_the_generated_runs_take_full_steps_in_batch_runs():
    """The property above is exercised: its batch runs took steps the loop takes in full."""
    test_batch_decode_runs_change_no_table()
    assert TOTALS["full_steps"] > 2000, TOTALS


def test_a_burst_at_page_1_takes_its_page_starting_steps_in_batch_runs():
    assert run_both(Trace(growing_burst(6)), "marconi-sglang", dict(page_size=1), 20000) > 1000


def test_a_burst_at_page_1_without_bounds_takes_its_steps_as_column_blocks():
    assert run_both(Trace(growing_burst(6)), "marconi-sglang", dict(page_size=1), 20000, bounds=False) > 1000
    knobs = dict(page_size=1, track_interval=64, swa_eviction_interval=32)
    assert run_both(Trace(growing_burst(6)), "sglang-retain", knobs, 20000, bounds=False) > 1000


def test_a_burst_on_tight_pools_stops_its_runs_for_room_and_still_matches():
    knobs = dict(page_size=16, track_interval=64, swa_eviction_interval=32, max_running_requests=8)
    assert run_both(Trace(growing_burst(10)), "sglang-retain", knobs, 9000) > 200


def test_a_burst_under_marconis_byte_budget_takes_batch_runs():
    """One byte budget for KV and states: a run's room is the budget's, and an event step's new state weighs
    in it too (those steps are left to the loop)."""
    assert run_both(Trace(growing_burst(8)), "marconi-sglang", dict(page_size=1), 20000, 1.5e8) > 1000
