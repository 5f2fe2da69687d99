"""A split's page lists cut in place where the tree owns them (``page_cuts.cut_pages``, ``KEEP_HEAD_IN_PLACE``)
against the two slices (the reference): the same halves, the head in the node's own list only where the tree
owns its lists, and generated FreeToken runs (the trees that own them) equal with the switch on and off: every
split's halves and the FULL pool's free ids after it, on real page ids, and the run's tables."""

from __future__ import annotations

import hashlib

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.page_cuts as page_cuts
from sim.cache.manager import CacheManager
from sim.cache.page_cuts import cut_pages
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn


@example(pages=[7, 8], cut=1, owned=True, switch=True)
@example(pages=[7, None, 9], cut=2, owned=False, switch=True)
@given(
    pages=st.lists(st.one_of(st.none(), st.integers(-1, 50)), min_size=2, max_size=40),
    cut=st.integers(1, 39),
    owned=st.booleans(),
    switch=st.booleans(),
)
def test_cut_pages_is_the_two_slices(pages, cut, owned, switch):
    cut = min(cut, len(pages) - 1)
    before = list(pages)
    page_cuts.KEEP_HEAD_IN_PLACE, old = switch, page_cuts.KEEP_HEAD_IN_PLACE
    try:
        head, tail = cut_pages(pages, cut, owned)
    finally:
        page_cuts.KEEP_HEAD_IN_PLACE = old
    assert (head, tail) == (before[:cut], before[cut:])
    assert tail is not pages
    assert (head is pages) == (owned and switch)  # the list is kept only where the tree owns it
    if not (owned and switch):
        assert pages == before  # a list someone else may hold is left as it was


@pytest.mark.parametrize("owned", [True, False])
def test_a_shared_list_is_cut_only_where_the_tree_owns_its_lists(owned):
    """A twin holding the node's list (as ``marconi_fork`` makes them) sees it changed only by an owning tree."""
    tree = RadixTree(1, Pool("full", 100), Pool("swa", 100), Pool("state", 0))
    tree.owns_page_lists = owned
    node = tree.add_leaf(tree.root, seq(("a", 6)), tree.full_pool.alloc(6), tree.swa_pool.alloc(6))
    full, swa = list(node.full_pages), list(node.swa_pages)
    twin_full = node.full_pages
    upper = tree.split(node, 2)
    assert (upper.full_pages, node.full_pages) == (full[:2], full[2:])
    assert (upper.swa_pages, node.swa_pages) == (swa[:2], swa[2:])
    assert (upper.full_pages is twin_full) == owned
    assert twin_full == (full[:2] if owned else full)


def trees_owning_lists(policy: str) -> list[bool]:
    """``owns_page_lists`` of every tree a small run of ``policy`` makes."""
    config = SimConfig(
        policy=policy, model="qwen3-next" if "free" in policy else "inkling", pool_tokens=4_000
    )
    managers = []
    original = CacheManager.__init__

    def kept(self, *args, **kwargs):
        original(self, *args, **kwargs)
        managers.append(self)

    CacheManager.__init__ = kept
    try:
        simulate(multiturn(num_sessions=2, num_turns=2, seed=1), config)
    finally:
        CacheManager.__init__ = original
    return [manager.tree.owns_page_lists for manager in managers]


@pytest.mark.interpreted  # patches CacheManager.__init__
@pytest.mark.parametrize(
    "policy, owned", [("freetoken-budget", True), ("freetoken", True), ("marconi", False), ("sglang", False)]
)
def test_freetoken_trees_own_their_lists_and_marconis_do_not(policy, owned):
    found = trees_owning_lists(policy)
    assert found and set(found) == {owned}


REAL_SPLIT = RadixTree.split  # read once: a second run's patch must not wrap the first's


def logged_run(trace, config, switch: bool, monkeypatch) -> tuple[list, object]:
    log: list = []
    original = REAL_SPLIT

    def split(tree, node, offset):
        upper = original(tree, node, offset)
        halves = (upper.full_pages, node.full_pages, upper.swa_pages, node.swa_pages, tree.owns_page_lists)
        stack = tree.full_pool.returned_ids()
        log.append(hashlib.sha256(repr((halves, stack)).encode()).hexdigest())
        return upper

    monkeypatch.setattr(RadixTree, "split", split)
    monkeypatch.setattr(page_cuts, "KEEP_HEAD_IN_PLACE", switch)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: the halves' ids are compared
    return log, simulate(trace, config)


@pytest.mark.interpreted  # patches RadixTree.split, which the compiled core calls directly
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_freetoken_runs_equal_with_the_cut_in_place(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda switch: logged_run(trace, config, switch, monkeypatch))


@pytest.mark.interpreted  # patches RadixTree.split
@pytest.mark.parametrize("policy", ["freetoken", "freetoken-budget"])
def test_the_runs_split_owned_lists(policy, monkeypatch):
    """A fixed run that splits owned lists (a floor: a run that never splits would pass anything), equal on and
    off."""
    trace = fanout(num_groups=4, prompts_per_group=4, system_len=300, question_len=40, output_len=40, seed=2)
    config = SimConfig(policy=policy, model="qwen3-next", knobs=dict(page_size=1), pool_tokens=3_000)
    (on_log, _), _ = same_both_ways(lambda switch: logged_run(trace, config, switch, monkeypatch))
    assert len(on_log) >= 3
