"""A request's freed SWA pages are a prefix of its own pages (``own_swa``), whatever the order of allocations,
frees below a frontier (page-aligned or not) and hand-overs to the tree; ``drop_own_swa_below`` and
``free_live``, which read only a run's ends, free exactly the live pages a page-by-page filter finds; and
``check_integrity`` rejects a request whose freed page lies among live ones."""

from __future__ import annotations

import pytest
from cache_helpers import manager, seq
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.components import SWA
from sim.cache.insert import free_live
from sim.cache.integrity import IntegrityError
from sim.cache.locks import LockSet
from sim.cache.pools import Pool
from sim.cache.request import RequestCache
from sim.cache.results import MatchResult
from sim.cache.tree import RadixTree


def fresh(page: int) -> RequestCache:
    node = manager("freetoken").tree.root
    return RequestCache("r", seq(("t", 10_000)), 10_000, MatchResult(0, 0, node), LockSet("r", node), page)


operations = st.lists(
    st.tuples(st.sampled_from(["alloc", "drop", "take", "slice"]), st.integers(0, 40), st.integers(0, 40)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([1, 2, 4]), operations)
def test_freed_pages_stay_a_prefix_and_the_ends_tell(page, ops):
    req, next_id = fresh(page), 0
    for op, a, b in ops:
        if op == "alloc":
            req.own_full += range(next_id, next_id + a)
            req.own_swa += range(next_id, next_id + a)
            next_id += a
        elif op == "drop":  # a frontier below what the request holds, page-aligned or not
            held_end = req.prefix_len + len(req.own_full) * page
            frontier = min(req.swa_frontier + a, held_end)
            start = max(req.swa_frontier, req.prefix_len)
            lo = req.own_page_index(start) if start < frontier else 0
            expected = [p for p in req.own_swa[lo : lo + len(range(start, frontier, page))] if p is not None]
            assert req.drop_own_swa_below(frontier) == (expected if start < frontier else [])
        elif op == "take" and req.own_full:
            end = req.prefix_len + min(a, len(req.own_full)) * page
            req.take_own_pages(end)
            req.prefix_len = end
        elif op == "slice":
            run = req.own_swa[min(a, b) : max(a, b)]
            tree = RadixTree(page, Pool("full", 0), Pool("swa", 10_000), Pool("state", 0))
            free_live(tree, run)
            assert tree.swa_pool.returned_ids() == [p for p in reversed(run) if p is not None]
        live_from = next((i for i, p in enumerate(req.own_swa) if p is not None), len(req.own_swa))
        assert None not in req.own_swa[live_from:]


def test_integrity_rejects_a_freed_page_among_live_ones():
    mgr = manager("freetoken", page_size=1)
    mgr.begin_pass()
    mgr.admit("r", seq(("t", 64)), 64)
    mgr.prepare_prefill("r", 32, 0)
    req = mgr.requests["r"]
    mgr.check_integrity()
    mgr.pools[SWA].free([req.own_swa[5]])
    req.own_swa[5] = None
    with pytest.raises(IntegrityError, match="freed SWA page among live ones"):
        mgr.check_integrity()
