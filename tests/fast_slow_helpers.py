"""What the timed loop's fast-path property tests share: a burst of requests arriving close together, and a fast
run (a loop method counted through a patch) asserted equal, table by table, to the step-by-step run."""

from __future__ import annotations

from unittest import mock

from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace


def burst_requests(
    draw, num_requests: int, max_prompt: int, max_output: int, max_arrival_ms: int
) -> list[Request]:
    """``num_requests`` requests of drawn prompt and output lengths, arriving within ``max_arrival_ms``."""
    lengths = st.tuples(
        st.integers(1, max_prompt), st.integers(2, max_output), st.integers(0, max_arrival_ms)
    )
    return [
        Request(
            id=f"r{index}",
            arrival=arrival_ms / 1000,
            output_len=output_len,
            prompt=[Segment(ref=f"r{index}", len=prompt_len)],
        )
        for index, (prompt_len, output_len, arrival_ms) in enumerate(
            draw(st.lists(lengths, min_size=num_requests, max_size=num_requests))
        )
    ]


def assert_fast_equals_slow(trace, config: SimConfig, owner: type, method: str, counting) -> None:
    """The fast run (``owner.method`` replaced by ``counting``, which calls the original) and the step-by-step
    run give equal request and step tables and summaries."""
    with mock.patch.object(owner, method, autospec=True, side_effect=counting):
        fast = simulate(trace, config, fast_path=True)
    slow = simulate(trace, config, fast_path=False)
    assert fast.requests.equals(slow.requests)
    assert fast.steps.equals(slow.steps)
    assert fast.summary == slow.summary


def growing_burst(num_requests: int) -> list[Request]:
    """Requests 20 ms apart, each longer (prompt and output) than the one before: the batch-run tests' burst."""
    return [
        Request(
            id=f"r{index}",
            arrival=index / 50,
            output_len=700 + 53 * index,
            prompt=[Segment(ref=f"r{index}", len=900 + 173 * index)],
        )
        for index in range(num_requests)
    ]


def nocache_burst(draw, pages: list[int]) -> tuple[Trace, str, dict, int]:
    """Requests arriving close together, the model, the knobs of a ``no-cache`` run (a page size of ``pages``,
    SWA frees and checkpoints at drawn intervals) and its pool's tokens."""
    requests = burst_requests(draw, draw(st.integers(3, 12)), 2500, 900, 400)
    page = draw(st.sampled_from(pages))
    knobs = dict(
        page_size=page,
        max_running_requests=draw(st.integers(2, 12)),
        track_interval=draw(st.sampled_from([48, 64, 128, 256])),
        swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
        swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])),
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
    )
    model = draw(st.sampled_from(["inkling", "small", "qwen3-next", "gemma-4-26b-a4b"]))
    pool_tokens = draw(st.sampled_from([3000, 6000, 12000, 40000]))
    return Trace(sorted(requests, key=lambda r: r.arrival)), model, knobs, pool_tokens


def null_config(model: str, page: int, pool_tokens: int, overlap: bool, bounds: bool) -> SimConfig:
    """A ``no-cache`` run's config: the page size, checkpoints every four pages, the overlap loop and bounds as
    given, and a pool of ``pool_tokens`` (0: the model's default pools)."""
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4, overlap=overlap)
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}
    return SimConfig(policy="no-cache", model=model, knobs=knobs, bounds=bounds, **pools)


@st.composite
def null_bursts(draw):
    """A burst of 2 to 10 requests on ``no-cache``, with SWA or without, pages 1, 2 or 16, tight or roomy pools."""
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    model, page = draw(st.sampled_from(["inkling", "qwen3-next"])), draw(st.sampled_from([1, 2, 16]))
    pool_tokens = draw(st.sampled_from([0, 3000, 12000]))
    config = null_config(model, page, pool_tokens, draw(st.booleans()), draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config
