"""The default loop's runs of full steps (``sim/run/prefill_runs.py``, ``PREFILL_RUNS``) against the loop taking
each step in its own event: the same request and step tables, summary and retractions.

Generated sessions on the default loop's presets (``no-cache``, ``marconi-vllm``): open-loop requests arriving
while earlier prompts are chunked, closed-loop follow-ups sent a think time after a request ends (a run's last
step ends it: its followers start at that step's end), prompts sharing a prefix, small chunk budgets (prompts
chunked over many steps beside decodes), running caps and pools tight enough that chunks are refused or stall,
requests are retracted and parked, and the cache evicts. Each run counts the steps its runs took, so the property
is not met by never taking one."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run import prefill_runs
from sim.run.simulate import SimConfig
from sim.trace import Request, Segment, Trace
from tests.default_loop_switches import switched_both_ways

_COMPLETE_STEP = prefill_runs.complete_step

# the runs count through a patch of a name the run looks up, which the compiled core would not see
pytestmark = pytest.mark.interpreted


@st.composite
def sessions(draw) -> list[Request]:
    """Sessions of one to three requests: each head arrives within 400 ms, each follow-up a think time after the
    one before it ends; some prompts open with a shared prefix."""
    shared_len = draw(st.integers(1, 600))
    requests: list[Request] = []
    for session in range(draw(st.integers(3, 8))):
        before = None
        for turn in range(draw(st.integers(1, 3))):
            rid = f"s{session}t{turn}"
            prompt = [Segment(ref=rid, len=draw(st.integers(1, 2500)))]
            if draw(st.booleans()):
                prompt.insert(0, Segment(ref="shared", len=shared_len))
            timing = (
                dict(arrival=draw(st.integers(0, 400)) / 1000)
                if before is None
                else dict(after=before, think_time=draw(st.integers(0, 50)) / 1000)
            )
            output_len = draw(st.integers(2, 300))
            requests.append(Request(id=rid, session=f"s{session}", prompt=prompt, output_len=output_len, **timing))
            before = rid
    return requests


@st.composite
def runs(draw):
    """``(trace, config)``: generated sessions on a default-loop preset, page, budget, cap and pools drawn."""
    page = draw(st.sampled_from([1, 2, 16, 64]))
    policy = draw(st.sampled_from(["no-cache", "marconi-vllm"] if page > 1 else ["no-cache"]))
    knobs = dict(
        page_size=page,
        track_interval=page if policy == "marconi-vllm" else 64,
        chunked_prefill_size=max(page, 16) * draw(st.integers(1, 12)),
        max_running_requests=draw(st.integers(1, 12)),
    )
    pool_tokens = draw(st.sampled_from([0, 3000, 6000, 16000]))
    pools = dict(pool_tokens=pool_tokens, mamba_states=draw(st.sampled_from([8, 48]))) if pool_tokens else {}
    trace = Trace(sorted(draw(sessions()), key=lambda r: (r.arrival is None, r.arrival or 0.0)))
    return trace, SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=False, **pools)


@contextmanager
def counting_run_steps(count: list[int]):
    """Counts the steps the runs take (the loop's own steps finish through another name)."""

    def complete_step(*args):
        count[0] += 1
        return _COMPLETE_STEP(*args)

    original, prefill_runs.complete_step = prefill_runs.complete_step, complete_step
    try:
        yield
    finally:
        prefill_runs.complete_step = original


def run_steps_taken(trace: Trace, config: SimConfig) -> int:
    """The run with the runs on and off held the same; how many steps the runs took."""
    on, _ = switched_both_ways(
        (prefill_runs, "PREFILL_RUNS"), trace, config, True, counting=counting_run_steps
    )
    return on[2]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(runs())
def test_runs_of_full_steps_are_the_loops_steps(drawn):
    run_steps_taken(*drawn)


def test_generated_runs_take_steps_in_runs():
    """The property above on ten of its cases, not met vacuously: most of them take steps in runs."""
    taken: list[int] = []

    @settings(max_examples=10, deadline=None, derandomize=True)
    @given(runs())
    def count(drawn):
        taken.append(run_steps_taken(*drawn))

    count()
    assert sum(1 for num_steps in taken if num_steps > 0) >= len(taken) // 2


@pytest.mark.parametrize(("policy", "page"), [("no-cache", 16), ("marconi-vllm", 16), ("marconi-vllm", 2)])
@pytest.mark.parametrize("pool_tokens", [0, 5000])
def test_long_prompts_beside_decodes_and_follow_ups(policy: str, page: int, pool_tokens: int):
    """Long prompts chunked beside the earlier ones' decodes, each followed 10 ms after it ends by a second turn
    sharing its prompt; on the preset's pools and on pools that evict (and refuse)."""
    requests = []
    for index in range(6):
        first = Segment(ref=f"r{index}", len=1500 + 211 * index)
        requests.append(Request(id=f"r{index}", arrival=index / 20, output_len=60 + 37 * index, prompt=[first]))
        requests.append(
            Request(id=f"r{index}b", after=f"r{index}", think_time=0.01, output_len=40,
                    prompt=[first, Segment(ref=f"r{index}b", len=300)])
        )
    knobs = dict(page_size=page, track_interval=page if policy == "marconi-vllm" else 64,
                 chunked_prefill_size=max(page, 16) * 4, max_running_requests=8)
    pools = dict(pool_tokens=pool_tokens, mamba_states=16) if pool_tokens else {}
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=False, **pools)
    assert run_steps_taken(Trace(requests), config) > 0
