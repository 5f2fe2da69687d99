"""A run of SGLang's lone chunks is taken in one event (``sglang_chunk_runs.CHUNK_RUNS``, ``sim/run/chunk_runs.py``):
whole timed runs make the same tables with the switch on and off.

Generated bursts of long prompts cut into small chunks (so a chunked request's chunk runs alone, others waiting,
running or neither), some followed by a turn after a think time (zero included: a finish starts a process that
is the next event), arrivals on quarter seconds that a fixed step time of a quarter second ties with, on the
presets of SGLang's loop (the proved rules and others: `no-cache`, whose pass is begun every time), every
waiting-queue order, pages 1/16/64, tight and loose pools (retractions, evictions, requests given up on), the
overlap loop and the plain one, mixed chunks, bounds on and off: the request and step tables and the summary
equal. The lone passes taken are counted, so a floor holds the run reached."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run import chunk_runs
from sim.run.backend import FixedStepBackend
from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_chunk_runs
from sim.trace import Request, Segment, Trace
from tests.same_runs import assert_same_run

# the counts go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

POLICIES = [
    "radix",
    "radix",
    "marconi-sglang",
    "marconi-sglang",
    "sglang",
    "sglang-retain",
    "no-cache",
    "marconi",
]
ORDERS = ["fcfs", "fcfs", "lpm", "lof", "hrrn", "dfs-weight"]
TOTALS = {"runs": 0, "lone": 0, "kept": 0}


@st.composite
def sessions(draw) -> Trace:
    """Long prompts arriving on quarter seconds or close together, some followed by a turn extending them."""
    requests: list[Request] = []
    arrival = 0.0
    for index in range(draw(st.integers(1, 6))):
        arrival += draw(st.sampled_from([0.0, 0.005, 0.25, 0.5]))
        prompt = [Segment(ref=f"s{index}", len=draw(st.integers(1, 3000)))]
        parent: str | None = None
        for turn in range(draw(st.integers(1, 2))):
            request_id = f"s{index}t{turn}"
            requests.append(
                Request(
                    id=request_id,
                    arrival=arrival if parent is None else None,
                    after=parent,
                    think_time=0.0 if parent is None else draw(st.sampled_from([0.0, 0.25, 0.1])),
                    output_len=draw(st.integers(1, 400)),
                    prompt=list(prompt),
                    session=None if parent is None else f"s{index}",
                )
            )
            prompt = prompt + [Segment(ref=f"{request_id}o", len=draw(st.integers(1, 600)))]
            parent = request_id
    return Trace(requests)


@st.composite
def cases(draw):
    policy = draw(st.sampled_from(POLICIES))
    page = draw(st.sampled_from([1, 16, 16, 64]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 16)),
        max_running_requests=draw(st.integers(1, 8)),
        overlap=draw(st.sampled_from([True, True, True, False])),
        mixed_chunk=draw(st.sampled_from([False, False, True])),
        schedule_policy=draw(st.sampled_from(ORDERS)),
    )
    pool_tokens = draw(st.sampled_from([3000, 8000, 60000]))
    return draw(sessions()), policy, knobs, pool_tokens, draw(st.booleans()), draw(st.booleans())


def _run(trace: Trace, config: SimConfig, fixed: bool):
    backend = FixedStepBackend(0.25, 0.0) if fixed else None
    return simulate(trace, config, backend=backend, fast_path=True)


def run_both(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool, fixed: bool) -> None:
    """The run with lone chunk runs and without, asserted the same; counts the lone passes taken."""
    model = "qwen3-next" if policy == "radix" else "inkling"
    config = SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    original = chunk_runs.schedule_lone_chunk

    def counted(sched, iteration, kept):
        TOTALS["lone"] += 1
        TOTALS["kept"] += kept is not None
        return original(sched, iteration, kept)

    try:
        with mock.patch.object(chunk_runs, "schedule_lone_chunk", side_effect=counted):
            fast = _run(trace, config, fixed)
    except ValueError:
        return  # a configuration or trace the engine refuses (both runs check it alike)
    with mock.patch.object(sglang_chunk_runs, "CHUNK_RUNS", False):
        reference = _run(trace, config, fixed)
    assert_same_run(fast, reference)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cases())
def test_lone_chunk_runs_change_no_table(case):
    TOTALS["runs"] += 1
    run_both(*case)


def test_the_generated_runs_take_lone_chunks():
    """The property above is exercised: its runs took many lone passes, many with the pass's budget kept."""
    if not TOTALS["runs"]:
        test_lone_chunk_runs_change_no_table()
    assert TOTALS["lone"] > 300 and TOTALS["kept"] > 100, TOTALS


@pytest.mark.parametrize("policy", ["radix", "marconi-sglang", "sglang", "no-cache"])
@pytest.mark.parametrize("fixed", [False, True])
def test_a_long_prompt_among_short_ones(policy, fixed):
    """A 6,000-token prompt in 256-token chunks while short requests arrive behind it and decode: the lone
    passes are taken (runs cut by the arrivals), and the run is the reference's."""
    requests = [Request(id="long", arrival=0.0, output_len=50, prompt=[Segment(ref="long", len=6000)])]
    requests += [
        Request(
            id=f"r{i}", arrival=0.05 * i, output_len=30 + i, prompt=[Segment(ref=f"r{i}", len=200 + 40 * i)]
        )
        for i in range(1, 12)
    ]
    config = SimConfig(
        policy=policy,
        model="qwen3-next" if policy == "radix" else "inkling",
        knobs=dict(page_size=16, chunked_prefill_size=256),
        mamba_states=48,
    )
    before = TOTALS["lone"]
    run_both(Trace(requests), policy, dict(config.knobs), 60000, False, fixed)
    assert TOTALS["lone"] - before >= 15
