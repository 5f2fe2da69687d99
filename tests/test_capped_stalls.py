"""The default loop's memo of first chunks no budget can size (``sim/sched/capped_stalls.py``): with it on, every
table, summary and retraction (its reason included) is as with every step asking the rules (the memo off), in
the step-by-step loop and in the fast one; the fast one also skips beginning a pass at its batch runs' event
steps (``DefaultScheduler.advance_plain``), which the step-by-step reference never does. Generated bursts on
``no-cache`` at pages 1/2/16/64 with small chunk budgets (a request admitted with less than a page of the pass's
chunk left is capped below a page and stalls until the loop parks it), bounds on and off; each run counts the
chunks the memo answered, so the property is not met by never answering."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.sched import capped_stalls
from sim.sched.capped_stalls import CappedStalls
from sim.sched.default import DefaultScheduler
from sim.trace import Request, Segment, Trace
from tests.fast_slow_helpers import burst_requests

_HOLDS = CappedStalls.holds
_RETRACT = DefaultScheduler._retract

# the runs here count through patches of CappedStalls.holds and DefaultScheduler._retract, which the compiled core binds
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


@st.composite
def bursts(draw):
    """Requests arriving close together, and the knobs of a ``no-cache`` run whose first chunks stall."""
    requests = burst_requests(draw, draw(st.integers(6, 12)), 4000, 300, 300)
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        track_interval=64 * draw(st.integers(1, 4)),
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 8)),
        max_running_requests=draw(st.integers(4, 16)),
        swa_eviction_interval=draw(st.sampled_from([7, 32, 128])),
        swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
    )
    pool_tokens = draw(st.sampled_from([8000, 16000, 40000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), knobs, pool_tokens, draw(st.booleans())


def run_recorded(trace: Trace, config: SimConfig, fast_path: bool, remember: bool):
    """A run's tables and summary, its retractions with their reasons, and how often the memo said a chunk stalls."""
    retracted: list[tuple[str, str]] = []
    answered = [0]

    def retract(scheduler: DefaultScheduler, victim, why: str) -> None:
        retracted.append((victim.request_id, why))
        _RETRACT(scheduler, victim, why)

    def holds(memo: CappedStalls, request_id: str) -> bool:
        stalls = _HOLDS(memo, request_id)
        answered[0] += stalls
        return stalls

    with (
        mock.patch.object(capped_stalls, "REMEMBER_CAPPED", remember),
        mock.patch.object(DefaultScheduler, "_retract", autospec=True, side_effect=retract),
        mock.patch.object(CappedStalls, "holds", autospec=True, side_effect=holds),
    ):
        result = simulate(trace, config, fast_path=fast_path)
    return result, retracted, answered[0]


def assert_memo_changes_nothing(
    trace: Trace, knobs: dict, pool_tokens: int, bounds: bool, policy: str = "no-cache"
) -> int:
    """The memo on (fast loop, and step by step) against the reference (memo off, step by step); the chunks it
    answered in the fast run."""
    config = SimConfig(
        policy=policy, model="inkling", knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    reference, reference_retracted, _ = run_recorded(trace, config, fast_path=False, remember=False)
    answered = 0
    for fast_path in (True, False):
        result, retracted, count = run_recorded(trace, config, fast_path=fast_path, remember=True)
        assert result.requests.equals(reference.requests)
        assert result.steps.equals(reference.steps)
        assert result.summary == reference.summary
        assert retracted == reference_retracted
        answered += count if fast_path else 0
    return answered


@settings(max_examples=15, deadline=None, derandomize=True)
@given(bursts())
def test_remembered_stalls_change_no_table_nor_retraction(burst):
    assert_memo_changes_nothing(*burst)


def _burst() -> Trace:
    """Twelve requests within 300 ms, prompts to 3,900 tokens and outputs to 300."""
    lengths = [(3101, 120), (257, 280), (3903, 30), (1211, 210), (43, 200), (2609, 150), (917, 220), (3311, 90),
               (1723, 140), (601, 260), (2237, 100), (3529, 240)]
    return Trace([
        Request(id=f"r{index}", arrival=index / 40, output_len=output_len, prompt=[Segment(ref=f"r{index}", len=prompt_len)])
        for index, (prompt_len, output_len) in enumerate(lengths)
    ])


@pytest.mark.parametrize("page", [1, 2, 16, 64])
@pytest.mark.parametrize("bounds", [False, True])
def test_the_memo_answers_at_each_page_and_changes_nothing(page: int, bounds: bool):
    """A burst whose admissions late in a pass stall (a chunk budget of 3 pages, at least 48 tokens): the memo answers, so the property
    above is not met vacuously, and changes nothing."""
    knobs = dict(page_size=page, track_interval=128, chunked_prefill_size=max(page, 16) * 3, max_running_requests=12)
    answered = assert_memo_changes_nothing(_burst(), knobs, 40000, bounds)
    assert answered > 0 or page == 1  # at page 1 a pass with tokens left caps no first chunk below a page


@pytest.mark.parametrize("policy", ["no-cache", "marconi-vllm"])
def test_later_chunks_the_pools_stall_are_not_remembered(policy: str):
    """Eight long prompts arriving together on pools small enough that later chunks stall until decodes free
    room (``test_stalled_chunk_fast_path.py``'s burst): such a stall hangs on the pools and must be asked anew."""
    requests = [
        Request(id=f"r{index}", arrival=index / 100, output_len=300 + 37 * index,
                prompt=[Segment(ref=f"r{index}", len=1500 + 211 * index)])
        for index in range(8)
    ]
    knobs = dict(page_size=16, track_interval=64, chunked_prefill_size=512)
    assert_memo_changes_nothing(Trace(requests), knobs, 8000, False, policy)
