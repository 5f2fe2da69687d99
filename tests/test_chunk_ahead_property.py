"""The default loop's early answer (``sim/sched/chunk_ahead.py``): where the next step certainly takes a prompt
chunk, ``plain_decode_run`` answers 0 without asking the decoding requests.

An answer of 0 can change no output (the loop then takes a full step, the reference), so what is to prove is
that it loses no fast step: wherever the early answer fires, the full question (the switch off) answers 0 too.
Each run here asks both there, and also holds the fast run's tables equal to the step-by-step loop's. Generated
bursts on ``no-cache``, ``radix`` and ``marconi-vllm`` at pages 1/2/16/64, on the presets' pools and on pools
small enough that later chunks stall on them (then plain decode steps go on beside a stalled chunk: the answer
must not fire there), bounds on and off; each run counts the early answers, so the property is not met by never
answering."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.sched import chunk_ahead, default
from sim.sched.default import DefaultScheduler
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import burst_requests

_TAKES = chunk_ahead.takes_chunk_next
_PLAIN_RUN = DefaultScheduler.plain_decode_run

# the runs count through patches of names the default loop binds, which the compiled core would not see
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


@st.composite
def bursts(draw):
    """Requests arriving close together, and the knobs of a run whose chunks go beside decodes."""
    requests = burst_requests(draw, draw(st.integers(4, 10)), 3000, 600, 1500)
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        track_interval=page * draw(st.integers(1, 8)),
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 16)),
        max_running_requests=draw(st.integers(2, 12)),
    )
    policy = draw(st.sampled_from(["no-cache", "radix", "marconi-vllm"]))
    if policy == "marconi-vllm":
        knobs["track_interval"] = page  # vLLM+ keeps a state at every page
    pool_tokens = draw(st.sampled_from([0, 4000, 8000, 16000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, draw(st.booleans())


def early_answers(trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool) -> int:
    """The fast run, each early answer checked against the full question, its tables against the step-by-step
    run's; how many early answers it took."""
    pools = dict(pool_tokens=pool_tokens, mamba_states=64) if pool_tokens else {}  # 0: the preset's own
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)
    fired = [False]
    answered = [0]

    def takes(*args) -> bool:
        fired[0] = _TAKES(*args)
        return fired[0]

    def plain_decode_run(scheduler: DefaultScheduler, iteration: int):
        fired[0] = False
        answer = _PLAIN_RUN(scheduler, iteration)
        if fired[0]:
            answered[0] += 1
            with mock.patch.object(chunk_ahead, "ASK_CHUNKS_FIRST", False):
                assert _PLAIN_RUN(scheduler, iteration)[1] == 0, "an early answer lost fast steps"
        return answer

    with (
        mock.patch.object(default, "takes_chunk_next", side_effect=takes),
        mock.patch.object(DefaultScheduler, "plain_decode_run", autospec=True, side_effect=plain_decode_run),
    ):
        fast = simulate(trace, config, fast_path=True)
    slow = simulate(trace, config, fast_path=False)
    assert fast.requests.equals(slow.requests)
    assert fast.steps.equals(slow.steps)
    assert fast.summary == slow.summary
    return answered[0]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True)
@given(bursts())
def test_the_early_answer_loses_no_fast_step(burst):
    early_answers(*burst)


def test_generated_runs_answer_early_and_lose_nothing():
    """The property above on eight of its cases, not met vacuously: a quarter of the runs answer early."""
    answered = []

    @settings(max_examples=8, deadline=None, derandomize=True)
    @given(bursts())
    def count(burst):
        answered.append(early_answers(*burst))

    count()
    assert sum(1 for num_answers in answered if num_answers > 0) >= len(answered) // 4


def _long_prompts(num_requests: int) -> list[Request]:
    """Prompts of 1,500 tokens and more arriving 10 to 50 ms apart, each longer than the one before."""
    return [
        Request(id=f"r{index}", arrival=index / 20, output_len=300 + 37 * index,
                prompt=[Segment(ref=f"r{index}", len=1500 + 211 * index)])
        for index in range(num_requests)
    ]


@pytest.mark.parametrize(
    ("policy", "page"), [("no-cache", 1), ("no-cache", 2), ("no-cache", 16), ("no-cache", 64),
                         ("marconi-vllm", 2), ("marconi-vllm", 16), ("marconi-vllm", 64)]
)  # marconi-vllm at page 1 (a state a token, ~25 s here): in the generated property
def test_long_prompts_beside_decodes_answer_early(policy: str, page: int):
    """On the preset's pools, bounds on: each prompt prefills beside the earlier ones' decodes."""
    knobs = dict(page_size=page, track_interval=max(page, 64) if policy == "no-cache" else page,
                 chunked_prefill_size=max(page, 16) * 4, max_running_requests=8)
    assert early_answers(Trace(_long_prompts(6)), policy, knobs, 0, True) > 0


@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm"])
def test_chunks_the_pools_stall_take_no_early_answer(policy: str):
    """Eight long prompts on pools small enough that later chunks stall until decodes free room
    (``test_stalled_chunk_fast_path.py``'s burst): plain steps go on beside them, which no early answer may cut."""
    knobs = dict(page_size=16, track_interval=64 if policy == "no-cache" else 16, chunked_prefill_size=512)
    early_answers(Trace(_long_prompts(8)), policy, knobs, 8000, False)


@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm"])
def test_a_budget_the_decodes_leave_under_a_page_takes_no_early_answer(policy: str):
    """A chunk budget of 16 tokens at page 8: with more than 8 requests decoding, what is left sizes no chunk
    (plain steps go on beside it, which no early answer may cut); with fewer, the chunk is a page."""
    requests = [
        Request(id=f"r{index}", arrival=index / 50, output_len=120 + 29 * index,
                prompt=[Segment(ref=f"r{index}", len=64 + 16 * index)])
        for index in range(12)
    ]
    knobs = dict(page_size=8, track_interval=8, chunked_prefill_size=16, max_running_requests=12)
    assert early_answers(Trace(requests), policy, knobs, 0, False) > 0
