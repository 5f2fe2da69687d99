"""SGLang's batch runs fold idle event steps (``sim/sched/sglang_folds.py``): under the retain floor a request's
trigger fires at every step while its free target stays at the frontier, and those steps are taken at once,
each still a full step. Generated bursts and follow-up turns with long outputs (so frees reach the floor and
stall there), pages 1/2/16/64, track intervals and trigger intervals of several sizes, both triggers, the
overlap loop and the plain one, mixed chunks, tight and loose pools, bounds on and off, on the presets of
SGLang's loop: the fast run equals the step-by-step loop table by table (request and step tables, pool columns
included, summary with the bounds' figures, which read every full step's batch), and the folds ran."""

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

TOTALS = {"runs": 0, "folded": 0}


@st.composite
def sessions(draw):
    """Requests close together with long outputs, some followed by a turn that extends the prompt."""
    requests: list[Request] = []
    arrival_ms = 0
    for index in range(draw(st.integers(1, 5))):
        arrival_ms += draw(st.integers(0, 60))
        prompt = [Segment(ref=f"s{index}", len=draw(st.integers(1, 2500)))]
        parent: str | None = None
        for turn in range(draw(st.integers(1, 2))):
            request_id = f"s{index}t{turn}"
            arrival = arrival_ms / 1000 if parent is None else None
            output_len = draw(st.integers(2, 1400))
            requests.append(
                Request(id=request_id, arrival=arrival, after=parent, think_time=0.0, output_len=output_len,
                        prompt=list(prompt))
            )
            prompt = prompt + [Segment(ref=f"{request_id}o", len=draw(st.integers(1, 300)))]
            parent = request_id
    return requests


@st.composite
def cases(draw):
    policy = draw(st.sampled_from(["sglang-retain", "sglang-retain", "sglang-retain-tree", "sglang", "radix"]))
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 64)),
        max_running_requests=draw(st.integers(1, 8)),
        overlap=draw(st.sampled_from([True, True, False])),
        mixed_chunk=draw(st.booleans()),
    )
    if policy != "radix":
        knobs.update(track_interval=max(page, 16) * draw(st.integers(1, 16)))
        knobs.update(swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128, 300])))
        knobs.update(swa_free_trigger=draw(st.sampled_from(["tokens", "tokens", "tokens", "iterations"])))
    pool_tokens = draw(st.sampled_from([5000, 12000, 60000]))
    return Trace(draw(sessions())), policy, knobs, pool_tokens, draw(st.booleans())


def run_both(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool) -> None:
    """Fast and step-by-step runs asserted equal; counts the folded steps."""
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )

    def record_batch_run(engine: Engine, runs, starts, durations, steps, pools) -> None:
        TOTALS["folded"] += sum(map(_folded, [None, *steps], steps))
        _RECORD_BATCH_RUN(engine, runs, starts, durations, steps, pools)

    assert_fast_equals_slow(trace, config, Engine, "_record_batch_run", record_batch_run)


def _folded(before, full) -> bool:
    """Whether a run's full step was folded: its pools as moves, one step, ending nothing, and no pages (a quiet
    step that starts none is no full step) or the pages of the step just before it, also one such step (a quiet
    stretch's steps starting the same pages are one full step)."""
    if full.usage is not None or full.num_steps != 1 or full.finished:
        return False
    if not full.pages:
        return True
    return (
        before is not None
        and before.usage is None
        and before.num_steps == 1
        and before.offset == full.offset - 1
        and before.pages == full.pages
    )


@pytest.mark.slow
@settings(max_examples=70, deadline=None, derandomize=True)
@given(cases())
def test_folded_idle_event_steps_change_no_table(case):
    TOTALS["runs"] += 1
    run_both(*case)


@pytest.mark.slow
def test_the_generated_runs_fold_idle_event_steps():
    """The property above is exercised: its runs folded many idle event steps."""
    if not TOTALS["runs"]:
        test_folded_idle_event_steps_change_no_table()
    assert TOTALS["folded"] > 2000, TOTALS


def growing_long_burst() -> Trace:
    """Six requests 5 ms apart, prompts 900 to 1,955 tokens, outputs 1,100 to 1,285: long decodes whose frees
    reach the retain floor, on pools where the pages they start cut folds short (and stop runs)."""
    return Trace(
        [
            Request(
                id=f"r{index}",
                arrival=index / 200,
                output_len=1100 + 37 * index,
                prompt=[Segment(ref=f"r{index}", len=900 + 211 * index)],
            )
            for index in range(6)
        ]
    )


@pytest.mark.parametrize(("page", "pool_tokens"), [(1, 9000), (2, 14000), (16, 14000), (64, 9000)])
def test_a_long_burst_folds_and_changes_no_table(page: int, pool_tokens: int):
    """Fixed bursts (the overlap loop, bounds on; the plain loop, bounds off): equal tables, and folds ran."""
    TOTALS["folded"] = 0
    for overlap, bounds in ((True, True), (False, False)):
        knobs = dict(page_size=page, overlap=overlap, chunked_prefill_size=max(page, 16) * 64)
        run_both(growing_long_burst(), "sglang-retain", knobs, pool_tokens, bounds)
    assert TOTALS["folded"] > 300, TOTALS
