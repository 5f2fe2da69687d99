"""Marconi's pick at alpha 0 reads the raw recencies' first lowest (``marconi_evict.ZERO_ALPHA_BY_RECENCY``), in
the walk itself (``first_oldest``) where no stale count needs the candidates: the whole score, min-max normalised
recency plus 0 x normalised efficiency over ``scan``'s candidates, is the reference. Held to it on generated
candidate lists (stamps close together so that recencies tie, ages 0 and 1 clamped alike, ends that
make efficiencies differ), on generated caches run request by request with alpha 0 (every decision and hit, and
each component's pick after every request),
and on whole runs where the tuner picks alpha (its figures, the chosen alpha, the tables).
"""

from __future__ import annotations

from unittest import mock

from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anonymous_pages import decisions, request_lists, run_request, tight_marconi_caches
from test_marconi_fork import WINDOW, tuner_for

from sim.cache.byte_budget import BYTES
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines import marconi_evict
from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_recency import Recency
from sim.cache.node import Node
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy
from sim.tokens import TokenSeq
from sim.trace import Trace
from sim.trace.records import Request, Segment

# a candidate: (age: now - its stamp, or None for no stamp; its end above the parent's; has a state)
candidate = st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.integers(1, 40), st.booleans())
REACHED = {"lowest not first": 0, "equal lowest": 0, "alpha changes the victim": 0}
ALL_EQUAL = [(3, 5, True), (3, 9, True), (3, 2, True)]
CLAMPED = [(1, 5, True), (0, 30, True), (1, 2, False)]  # ages 0 and 1 read alike: all equal, the first
LOWEST_LATER = [(2, 40, True), (6, 40, True), (5, 3, True), (6, 20, True), (None, 1, True)]


def _root() -> Node:
    """An empty tree's root (a parentless ``Node`` of one's own is refused by the compiled core)."""
    return make_manager(hybrid_model(), make_policy("marconi"), PoolSizes(64, 64, 4)).tree.root


def _candidates(drawn: list[tuple[int | None, int, bool]], now: int) -> tuple[list[Node], list[int], Recency]:
    """Nodes in preorder under one parent ending at 7, each stamped ``now - age`` (or never)."""
    root = _root()
    recency, found, ends = Recency(), [], []
    recency.now = now
    for age, length, has_state in drawn:
        node = Node(TokenSeq.of("t", length), 7, root, [], [], 1 if has_state else None)
        if age is not None:
            recency.set(node, now - age)
        found.append(node)
        ends.append(7)
    return found, ends, recency


def _best(found, ends, recency, alpha: float, code: bool, fast: bool) -> tuple[Node, int | None]:
    cost = NodeCost(hybrid_model(), 40, "code" if code else "paper")
    evictor = marconi_evict.MarconiEvictor(cost, recency, True, code, True)
    evictor.alpha = alpha
    original, marconi_evict.ZERO_ALPHA_BY_RECENCY = marconi_evict.ZERO_ALPHA_BY_RECENCY, fast
    try:
        return evictor._best(found, ends)
    finally:
        marconi_evict.ZERO_ALPHA_BY_RECENCY = original


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(candidate, min_size=1, max_size=12), st.integers(6, 9), st.booleans())
@example(ALL_EQUAL, 6, False)
@example(CLAMPED, 6, True)
@example(LOWEST_LATER, 6, False)
def test_the_first_lowest_recency_is_the_whole_scores_victim_at_alpha_0(drawn, now, code):
    found, ends, recency = _candidates(drawn, now)
    fast = _best(found, ends, recency, 0.0, code, fast=True)
    assert fast == _best(found, ends, recency, 0.0, code, fast=False)
    ages = [max(now - recency.of(node), 1) for node in found]
    REACHED["lowest not first"] += ages.index(max(ages)) > 0
    REACHED["equal lowest"] += ages.count(max(ages)) > 1 and len(set(ages)) > 1
    REACHED["alpha changes the victim"] += _best(found, ends, recency, 2.0, code, fast=True)[0] is not fast[0]


def test_the_fixed_examples_reach_what_the_property_is_about():
    """Floors on the fixed examples alone (a generated run adds to them, never needed)."""
    REACHED.update(dict.fromkeys(REACHED, 0))
    for drawn in (ALL_EQUAL, CLAMPED, LOWEST_LATER):
        test_the_first_lowest_recency_is_the_whole_scores_victim_at_alpha_0.hypothesis.inner_test(
            drawn, 6, False
        )
    assert REACHED == {"lowest not first": 1, "equal lowest": 1, "alpha changes the victim": 3}


def _switched(fast: bool):
    return mock.patch.object(marconi_evict, "ZERO_ALPHA_BY_RECENCY", fast)


def _run_alone_both_ways(model, knobs, sizes, requests, fast: bool) -> tuple:
    cache = make_manager(model, make_policy("marconi", **knobs), sizes)
    log = []
    with _switched(fast):
        for index, request in enumerate(requests):
            log.append((run_request(cache, index, request, knobs["chunked_prefill_size"]), decisions(cache)))
    return log, sum(cache.tree.num_evictions.values())


@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10))
def test_caches_at_alpha_0_decide_alike_request_by_request(configuration, requests):
    model, knobs, sizes = configuration
    knobs = {**knobs, "marconi_alpha": 0.0}
    on = _run_alone_both_ways(model, knobs, sizes, requests, True)
    assert on == _run_alone_both_ways(model, knobs, sizes, requests, False)


# a generated tree: each node (parent's index, or -1 for the root; age or None; state; lock: none, a request's
# path, a window, a resumed state)
tree_nodes = st.lists(
    st.tuples(st.integers(-1, 8), st.one_of(st.none(), st.integers(0, 4)), st.booleans(), st.integers(0, 3)),
    min_size=1,
    max_size=14,
)
WALKED = {"equal lowest": 0, "locked lowest": 0}


def _tree(drawn, now: int) -> tuple[Node, Recency]:
    """Nodes under one root, each under an earlier one (or the root), stamped ``now - age`` (or never)."""
    root = _root()
    recency, nodes = Recency(), []
    recency.now = now
    for index, (parent_at, age, has_state, lock) in enumerate(drawn):
        parent = nodes[parent_at] if 0 <= parent_at < index else root
        node = Node(TokenSeq.of(f"t{index}", 4), parent.end, parent, [], [], 1 if has_state else None)
        node.edge = (index,)
        parent.children[node.edge] = node
        node.full_lock, node.state_lock = lock == 1, lock == 3
        if lock == 2:
            node.swa_holders.add("r")
        if age is not None:
            recency.set(node, now - age)
        nodes.append(node)
    return root, recency


@settings(max_examples=400, deadline=None, derandomize=True)
@given(tree_nodes, st.integers(4, 6), st.booleans())
@example([(-1, 2, True, 0), (0, 4, True, 0), (0, 3, True, 0), (-1, 4, True, 0)], 6, True)
@example([(-1, 4, True, 1), (-1, 4, True, 2), (-1, 3, True, 0), (-1, 4, True, 0), (3, 4, True, 3)], 6, False)
def test_the_walk_keeps_the_first_lowest_of_the_scans_candidates(drawn, now, leaves_only):
    root, recency = _tree(drawn, now)
    found, ends = marconi_evict.scan(root, leaves_only, True)
    walked = marconi_evict.first_oldest(root, leaves_only, now, recency.stamps)
    assert walked is (_best(found, ends, recency, 0.0, False, fast=False)[0] if found else None)
    ages = [max(now - recency.of(node), 1) for node in found]
    WALKED["equal lowest"] += len(set(ages)) > 1 and ages.count(max(ages)) > 1
    WALKED["locked lowest"] += any(n.is_locked and not n.children for n in root.children.values())


def test_the_walks_fixed_examples_reach_ties_and_locks():
    WALKED.update(dict.fromkeys(WALKED, 0))
    for drawn, leaves_only in (
        ([(-1, 2, True, 0), (0, 4, True, 0), (0, 3, True, 0), (-1, 4, True, 0)], True),
        ([(-1, 4, True, 1), (-1, 4, True, 2), (-1, 3, True, 0), (-1, 4, True, 0), (3, 4, True, 3)], False),
    ):
        test_the_walk_keeps_the_first_lowest_of_the_scans_candidates.hypothesis.inner_test(
            drawn, 6, leaves_only
        )
    assert WALKED == {"equal lowest": 1, "locked lowest": 1}


PICKS = {"picks": 0, "not the first candidate": 0}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10))
def test_the_one_walk_picks_the_scored_victim(configuration, requests):
    """After every request, each component's pick at alpha 0: the walk's (``first_oldest``) is the whole
    score's over ``scan``'s candidates."""
    model, knobs, sizes = configuration
    cache = make_manager(model, make_policy("marconi", **{**knobs, "marconi_alpha": 0.0}), sizes)
    evictor = cache.rules.evictor(cache)
    for index, request in enumerate(requests):
        run_request(cache, index, request, knobs["chunked_prefill_size"])
        for comp in (FULL, SWA, MAMBA, BYTES):
            with _switched(True):
                fast = evictor.pick(cache.tree, comp)
            with _switched(False):
                assert fast == evictor.pick(cache.tree, comp), f"r{index} {comp}"
            found = marconi_evict.scan(cache.tree.root, comp in (FULL, SWA), evictor.has_mamba)[0]
            PICKS["picks"] += fast[0] is not None
            PICKS["not the first candidate"] += bool(found) and fast[0] is not found[0]


def test_the_one_walks_picks_reach_past_the_first_candidate():
    PICKS.update(dict.fromkeys(PICKS, 0))
    test_the_one_walk_picks_the_scored_victim()
    # 168 past the first in the examples tests/hypothesis_pins.py fixes; before that pin the examples changed with
    # what else the process imported (198 alone, 112 beside the whole suite, 52 beside ``conformance.generate``)
    assert PICKS["picks"] > 1000 and PICKS["not the first candidate"] > 100, PICKS


# run inside the floor test above (collected on its own too, its examples would run twice)
test_the_one_walk_picks_the_scored_victim.__test__ = False


def test_a_window_where_the_alphas_differ():
    """The fork test's window, whose figures differ between alphas: equal either way, alpha 0's own too."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "code"}
    figures = []
    for fast in (True, False):
        with _switched(fast):
            main, tuner, cost = tuner_for(hybrid_model(window=40), knobs, PoolSizes(900, 900, 12), WINDOW)
            figures.append((tuner.replay_all(main, cost), tuner.replay(main, cost, 0.0)))
    assert figures[0] == figures[1] and len(set(figures[0][0].values())) == 3


def _window_trace() -> Trace:
    """The fork test's window twice over, close together: a tuning, then the chosen alpha's evictions."""
    return Trace(
        [
            Request(
                id=f"r{index}",
                arrival=index * 0.05,
                output_len=output_len,
                prompt=[Segment(ref=f"shared{family}", len=shared_len)] * (shared_len > 0)
                + [Segment(ref=f"r{index}", len=own_len)],
            )
            for index, (family, shared_len, own_len, output_len) in enumerate(WINDOW * 2)
        ]
    )
