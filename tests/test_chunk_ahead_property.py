"""The default loop's early answer (``sim/sched/chunk_ahead.py``): where the next step certainly takes a prompt
chunk, ``plain_decode_run`` answers 0 without asking the decoding requests. With it on, every table and summary
is as with it off (the reference: every step asks them) and as the step-by-step loop's. Generated bursts on
``no-cache``, ``radix`` and ``marconi-vllm`` at pages 1/2/16/64 (chunks beside decodes, tight pools where later
chunks stall on the pools), bounds on and off; each run counts the early answers, so the property is not met by
never answering."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.sched import chunk_ahead, default
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests

_TAKES = chunk_ahead.takes_chunk_next

# the runs count through a patch of the name the default loop binds, which the compiled core would not see
pytestmark = pytest.mark.interpreted


@st.composite
def bursts(draw):
    """Requests arriving close together, and the knobs of a run whose chunks go beside decodes."""
    requests = burst_requests(draw, draw(st.integers(4, 8)), 3000, 300, 3000)
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        track_interval=64 * draw(st.integers(1, 4)),
        chunked_prefill_size=max(page, 16) * draw(st.integers(2, 16)),
        max_running_requests=draw(st.integers(2, 12)),
    )
    policy = draw(st.sampled_from(["no-cache", "radix", "marconi-vllm"]))
    if policy == "marconi-vllm":
        knobs["track_interval"] = page  # vLLM+ keeps a state at every page
    pool_tokens = draw(st.sampled_from([0, 6000, 16000, 40000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), policy, knobs, pool_tokens, draw(st.booleans())


def run_counted(trace: Trace, config: SimConfig, fast_path: bool, ask_first: bool):
    """A run's result, and how often the early answer said a chunk is taken next."""
    answered = [0]

    def takes(*args) -> bool:
        taken = _TAKES(*args)
        answered[0] += taken
        return taken

    with (
        mock.patch.object(chunk_ahead, "ASK_CHUNKS_FIRST", ask_first),
        mock.patch.object(default, "takes_chunk_next", side_effect=takes),
    ):
        result = simulate(trace, config, fast_path=fast_path)
    return result, answered[0]


def assert_early_answer_changes_nothing(
    trace: Trace, policy: str, knobs: dict, pool_tokens: int, bounds: bool
) -> int:
    """The early answer on (fast loop) against it off (fast loop) and the step-by-step loop; how often it fired."""
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}  # 0: the preset's own
    config = SimConfig(policy=policy, model="inkling", knobs=knobs, bounds=bounds, **pools)
    fast, answered = run_counted(trace, config, True, True)
    for reference, _ in (run_counted(trace, config, True, False), run_counted(trace, config, False, True)):
        assert fast.requests.equals(reference.requests)
        assert fast.steps.equals(reference.steps)
        assert fast.summary == reference.summary
    return answered


@pytest.mark.slow
@settings(max_examples=20, deadline=None, derandomize=True)
@given(bursts())
def test_the_early_answer_changes_no_table(burst):
    assert_early_answer_changes_nothing(*burst)


def test_the_generated_runs_answer_early():
    """The property (here on eight of its cases) is not met vacuously: a quarter of the runs answer early."""
    answered = []

    @settings(max_examples=8, deadline=None, derandomize=True)
    @given(bursts())
    def count(burst):
        answered.append(assert_early_answer_changes_nothing(*burst))

    count()
    assert sum(1 for count_ in answered if count_ > 0) >= len(answered) // 4


@pytest.mark.parametrize(
    ("policy", "page"), [("no-cache", 1), ("no-cache", 2), ("no-cache", 16), ("no-cache", 64),
                         ("marconi-vllm", 2), ("marconi-vllm", 16), ("marconi-vllm", 64)]
)  # marconi-vllm at page 1 (a state a token, ~25 s here): in the generated property
def test_long_prompts_beside_decodes_answer_early(policy: str, page: int):
    """Prompts of 2,000 to 3,400 tokens arriving 50 ms apart, bounds on, the preset's pools (on tight ones
    ``marconi-vllm``'s queue waits on the pools, and a loop with a request to admit takes no decode run): each
    prefills beside the earlier ones' decodes, so the early answer fires, and changes nothing."""
    requests = burst_requests_fixed(8)
    knobs = dict(page_size=page, track_interval=max(page, 64) if policy == "no-cache" else page,
                 chunked_prefill_size=max(page, 16) * 4, max_running_requests=8)
    answered = assert_early_answer_changes_nothing(Trace(requests), policy, knobs, 0, True)
    assert answered > 0


def burst_requests_fixed(num_requests: int):
    from sim.trace import Request, Segment

    return [
        Request(id=f"r{index}", arrival=index / 20, output_len=150 + 41 * index,
                prompt=[Segment(ref=f"r{index}", len=2000 + 197 * index)])
        for index in range(num_requests)
    ]
