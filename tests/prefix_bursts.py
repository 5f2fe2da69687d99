"""Bursts of requests on a few shared prefixes (system prompts), each followed by its own text and arriving close
together: the inputs SGLang's budget properties draw (locked pages walked or tallied, the prefill pass), where
running requests' paths share nodes. One builder for drawn and fixed bursts; each draw in the order its tests
have always drawn, so their derandomized examples stay what they were."""

from __future__ import annotations

from hypothesis import strategies as st

from sim.trace import Request, Segment, Trace

Shape = tuple[int, int, int, int]  # (prefix index, own length, output length, arrival in ms)


def prefix_requests(shapes: list[Shape], prefix_lens: list[int]) -> list[Request]:
    """One request a shape: its prefix's segment, then its own."""
    return [
        Request(
            id=f"r{index}",
            arrival=arrival_ms / 1000,
            output_len=output_len,
            prompt=[Segment(ref=f"p{group}", len=prefix_lens[group]), Segment(ref=f"r{index}", len=own_len)],
        )
        for index, (group, own_len, output_len, arrival_ms) in enumerate(shapes)
    ]


def draw_prefix_requests(draw, min_size: int, max_size: int, max_output: int = 500) -> list[Request]:
    """Up to three prefixes, then ``min_size`` to ``max_size`` requests on them."""
    prefix_lens = draw(st.lists(st.integers(1, 1500), min_size=1, max_size=3))
    shape = st.tuples(
        st.integers(0, len(prefix_lens) - 1),
        st.integers(1, 1200),
        st.integers(2, max_output),
        st.integers(0, 300),
    )
    return prefix_requests(draw(st.lists(shape, min_size=min_size, max_size=max_size)), prefix_lens)


def draw_sglang_knobs(draw, page: int) -> dict:
    """SGLang's knobs the budget properties vary at ``page``: the chunk, the running cap, overlap, mixed chunks."""
    return dict(
        page_size=page,
        chunked_prefill_size=max(page, 64) * draw(st.integers(2, 16)),
        max_running_requests=draw(st.integers(2, 12)),
        overlap=draw(st.booleans()),
        mixed_chunk=draw(st.booleans()),
    )


def paths_share_nodes(manager) -> bool:
    """Some running requests' paths share nodes: a walk up stops early at a node an earlier one counted."""
    paths = [r.last_node.path_from_root() for r in manager.requests.values()]
    return sum(map(len, paths)) > len({node.id for path in paths for node in path})


# a long burst on shared prefixes through tight pools: evicts, retracts and chunks under every loop
FIXED_BURST = Trace(
    prefix_requests(
        [(index % 3, 200 + 97 * index, 40 + 13 * index, 5 * index) for index in range(16)], [900, 400, 1300]
    )
)
# SGLang's knobs under which FIXED_BURST's running requests share their paths at most budget checks
SHARED_KNOBS = dict(page_size=1, chunked_prefill_size=128, max_running_requests=12, overlap=True)
