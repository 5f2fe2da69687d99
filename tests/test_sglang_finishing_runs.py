"""The SGLang overlap loop's runs through a finish (``sim/sched/sglang_fast.py``): a batch run takes the step that
gives requests their last output as its last step (``take_finishing_run``; the engine finishes them at its end),
and the step after, which processes them (the finish between its plans and its completion), as the next run's
first. Generated sessions (closed-loop follow-ups sharing their parent's prompt, think times of 0 to 300 ms, so
follow-ups arrive at and around the finishes), pages 1/2/16/64, bounds on and off, on the presets of SGLang's loop:
the fast run equals the step-by-step loop table by table, and the runs took finishes and their processing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.engine import Engine
from sim.run.simulate import SimConfig
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import assert_fast_equals_slow

_RECORD_BATCH_RUN = Engine._record_batch_run
# these tests patch the engine's methods, which the compiled core (its engine compiled) takes no patch of
pytestmark = pytest.mark.interpreted


@st.composite
def sessions(draw):
    """Open-loop requests close together, each followed by up to two turns that extend its prompt."""
    requests: list[Request] = []
    arrival_ms = 0
    for index in range(draw(st.integers(2, 6))):
        arrival_ms += draw(st.integers(0, 100))
        prompt = [Segment(ref=f"s{index}", len=draw(st.integers(1, 1500)))]
        parent: str | None = None
        for turn in range(draw(st.integers(1, 3))):
            request_id = f"s{index}t{turn}"
            output_len = draw(st.integers(2, 300))
            if parent is None:
                arrival, think_time = arrival_ms / 1000, 0.0
            else:
                arrival, think_time = None, draw(st.sampled_from([0.0, 0.001, 0.02, 0.3]))
            requests.append(
                Request(
                    id=request_id,
                    arrival=arrival,
                    after=parent,
                    think_time=think_time,
                    output_len=output_len,
                    prompt=list(prompt),
                )
            )
            prompt = prompt + [Segment(ref=f"{request_id}o", len=draw(st.integers(1, 400)))]
            parent = request_id
    return requests


@st.composite
def cases(draw):
    policy = draw(st.sampled_from(["radix", "sglang", "sglang-retain", "sglang-retain-tree", "marconi-sglang"]))
    page = 1 if policy == "marconi-sglang" else draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 64)),
        max_running_requests=draw(st.integers(2, 12)),
        overlap=draw(st.sampled_from([True, True, True, False])),
        schedule_policy=draw(st.sampled_from(["fcfs", "lpm", "hrrn"])),
        mixed_chunk=draw(st.booleans()),
    )
    if policy != "radix":
        knobs.update(track_interval=max(page, 16) * draw(st.integers(1, 8)))
        knobs.update(swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])))
    pool_tokens = draw(st.sampled_from([4000, 8000, 40000]))
    return Trace(draw(sessions())), policy, knobs, pool_tokens, draw(st.booleans())


TOTALS = {"runs": 0, "finished": 0, "processed": 0}


def run_both(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool) -> None:
    """Fast and step-by-step runs asserted equal; counts the requests the fast run's batch runs ended, and the
    runs that began right where such a run ended (their first step processed those finishes)."""
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    last = {"end": -1}

    def record_batch_run(engine: Engine, runs, starts, durations, steps, pools) -> None:
        TOTALS["processed"] += engine.iteration == last["end"]
        ended = len(steps[-1].finished)
        TOTALS["finished"] += ended
        last["end"] = engine.iteration + len(starts) if ended else -1
        _RECORD_BATCH_RUN(engine, runs, starts, durations, steps, pools)

    assert_fast_equals_slow(trace, config, Engine, "_record_batch_run", record_batch_run)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cases())
def test_runs_through_a_finish_change_no_table(case):
    TOTALS["runs"] += 1
    run_both(*case)


# the property runs once, inside the test below (which also asserts what its examples reach): collected
# on its own too, it ran its examples twice wherever pytest-xdist put the two tests on different workers
test_runs_through_a_finish_change_no_table.__test__ = False


def test_the_generated_runs_take_finishes_and_their_processing():
    """The property above is exercised: runs ended requests, and the next runs began by processing them."""
    test_runs_through_a_finish_change_no_table()
    assert TOTALS["finished"] > 100 and TOTALS["processed"] > 50, TOTALS
