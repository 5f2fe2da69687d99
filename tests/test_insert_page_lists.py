"""An insert hands the request's page lists to the tree without copying them where it can
(``insert._from``, and ``_add_new`` cutting the window's pages off the lists in place): every new node must
still hold exactly the pages the request held for its positions, FULL and SWA, in order.

Requests sharing prefixes (so inserts run on from existing nodes), prompts longer and shorter than the SWA
window (so the leaf is capped or not), page sizes 1 to 4, run alone one after another; each request's page
tables are read as its finish starts and compared with the nodes its insert created."""

from __future__ import annotations

from cache_helpers import hybrid_model, manager
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.events import Finished, FinishStarted
from sim.cache.solo_run import run_alone
from sim.tokens import TokenSeq

requests = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 90), st.integers(2, 60), st.integers(1, 9)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(
    preset=st.sampled_from(["marconi", "sglang-retain", "radix"]),
    page=st.sampled_from([1, 2, 4]),
    window=st.integers(1, 40),
    shapes=requests,
)
def test_new_nodes_hold_the_requests_pages(preset, page, window, shapes):
    cache = manager(preset, hybrid_model(window=window), page_size=page, chunked_prefill_size=8 * page)
    seen: dict[str, tuple[list[int], list[int | None], int]] = {}
    cache.events.subscribe(
        FinishStarted,
        lambda e: seen.update({e.request_id: (*cache.page_tables(e.request_id), _max_id(cache))}),
    )
    checked = []
    cache.events.subscribe(Finished, lambda e: checked.append(_check(cache, *seen[e.request_id])))
    for index, (head, shared, own, output) in enumerate(shapes):
        tokens = TokenSeq([(f"r:h{head}", 0, shared), (f"r:own{index}", 0, own), (f"o:{index}", 0, output)])
        run_alone(cache, f"q{index}", tokens, shared + own, output, 8 * page)
    assert len(checked) == len(shapes)


def _max_id(cache) -> int:
    return max((node.id for node in _nodes(cache.tree.root)), default=0)


def _nodes(root):
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


def _check(cache, full: list[int], swa: list, newest_before: int) -> int:
    page = cache.page_size
    new = [node for node in _nodes(cache.tree.root) if node.id > newest_before]
    for node in new:
        lo, hi = node.start // page, node.end // page
        assert node.full_pages == full[lo:hi]
        assert node.swa_pages is None or node.swa_pages == swa[lo:hi]
    return len(new)
