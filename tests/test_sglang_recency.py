"""SGLang's FULL recency in the simulator: a split stamps both halves (``_split_node``) and an insert stamps
every node it walks (``_insert_walk_step``), so simulate evicts the leaves SGLang 0.5.23 evicts on the
scenarios of tests/sglang_recency_scenarios.py (the engine's own answers, pinned), and the tree-level rules
hold on hand-checked trees."""

from __future__ import annotations

import pytest

from conformance.compare import simulated
from sim.cache.components import FULL
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from tests import sglang_recency_scenarios as hand
from tests.cache_helpers import seq


def outcomes(scenario, mode: str) -> list[tuple[int, bool]]:
    return [(o.cached_tokens, o.served) for o in simulated(scenario, "sglang", mode).values()]


@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize(
    "scenario, answer",
    [(hand.split_recency, hand.SPLIT_RECENCY), (hand.insert_recency, hand.INSERT_RECENCY)],
    ids=["split", "insert"],
)
def test_simulate_evicts_what_sglang_evicted(scenario, answer, mode):
    assert outcomes(scenario(), mode) == answer


def _tree(stamps_halves: bool) -> RadixTree:
    tree = RadixTree(4, Pool("full", 64), Pool("swa", 0), Pool("mamba", 0))
    tree.split_stamps_halves = stamps_halves
    return tree


@pytest.mark.parametrize("stamps_halves", [False, True])
def test_a_split_stamps_both_halves_only_where_the_engine_does(stamps_halves):
    tree = _tree(stamps_halves)
    leaf = tree.add_leaf(tree.root, seq(("a", 16)), [0, 1, 2, 3], None)
    before = leaf.full_stamp
    tree.add_leaf(tree.root, seq(("b", 8)), [4, 5], None)  # newer than the first leaf
    upper = tree.split(leaf, 8)
    if stamps_halves:  # SGLang: the new upper half at its creation, then the lower half
        assert before < upper.full_stamp < leaf.full_stamp == tree.clock
    else:
        assert upper.full_stamp == leaf.full_stamp == before
    # the FULL eviction order follows: the split leaf goes first only where it kept its old stamp
    victim = tree.pop_lru(FULL, lambda node: True)
    assert (victim is leaf) is (not stamps_halves)


def test_an_insert_walk_stamps_every_node_it_reaches_root_first():
    tree = _tree(True)
    top = tree.add_leaf(tree.root, seq(("a", 8)), [0, 1], None)
    low = tree.add_leaf(top, seq(("a", 8), ("b", 8)).slice(8), [2, 3], None)
    other = tree.add_leaf(tree.root, seq(("c", 4)), [4], None)
    path, depth = tree.walk(seq(("a", 8), ("b", 8)), touch=True)
    assert path == [top, low] and depth == 16
    assert other.full_stamp < top.full_stamp < low.full_stamp == tree.clock
