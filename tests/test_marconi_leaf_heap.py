"""Marconi's LRU presets pick their victim from a heap of stamps (``marconi_lru.LeafHeap``) instead of
listing every unlocked leaf in preorder (``marconi_evict.candidates``): every pick of a run must be the
leaf the scan picks (lowest stamp, the first in preorder among equals), on pools of a few dozen pages
where walks split nodes, leaves are evicted, their parents become leaves and stamps tie.
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import pytest
from cache_helpers import seq
from hypothesis import given, settings
from test_decode_fast_path_property import Run
from test_marconi_recency import request_lists, tight_lru_runs

from sim.cache.engines import marconi_lru
from sim.cache.engines.marconi_evict import candidates
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def _scan_pick(root: Node, stamp_of) -> Node | None:
    found = candidates(root, leaves_only=True)
    if not found:
        return None
    stamps = [stamp_of(node) for node in found]
    return found[stamps.index(min(stamps))]


@contextmanager
def checked_picks():
    """Every heap pick compared with the scan's; yields the list of picks made."""
    picks: list[Node | None] = []
    heap_pick = marconi_lru.LeafHeap.pick

    def pick(self, root, stamp_of):
        expected, got = _scan_pick(root, stamp_of), heap_pick(self, root, stamp_of)
        assert got is expected, f"heap picked {got}, the scan {expected}"
        picks.append(got)
        return got

    with mock.patch.object(marconi_lru.LeafHeap, "pick", pick):
        yield picks


_NUM_VICTIMS: list[int] = []


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_lru_runs(), request_lists(10))
def test_every_heap_pick_is_the_scans_pick(configuration, requests):
    preset, model, knobs, sizes = configuration
    run = Run(preset, model, knobs, fast=True, sizes=sizes)
    assert run.manager.rules.recency.leaves is not None
    with checked_picks() as picks:
        for index, (family, shared_len, own_len, output_len) in enumerate(requests):
            tokens = seq(
                (f"shared{family}", shared_len), (f"r{index}", own_len), (f"out-r{index}", output_len)
            )
            run.start(f"r{index}", tokens, shared_len + own_len, output_len)
            for rid in sorted(run.remaining):
                run.decode(rid, output_len)
    _NUM_VICTIMS.append(sum(node is not None for node in picks))


# the property runs once, inside test_the_property_evicts (which also asserts what its examples reach):
# collected on its own too, it ran its examples twice
test_every_heap_pick_is_the_scans_pick.__test__ = False


@pytest.mark.interpreted
def test_the_property_evicts():
    """The configurations above do reach eviction (else the property compares nothing)."""
    _NUM_VICTIMS.clear()
    test_every_heap_pick_is_the_scans_pick()
    assert sum(_NUM_VICTIMS) > 100


def _tree(*branches: tuple[str, ...]) -> Node:
    root = RadixTree(1, Pool("full", 0), Pool("swa", 0), Pool("states", 0)).root
    for branch in branches:
        node = root
        for name in branch:
            child = node.children.get((name,))
            if child is None:
                child = Node(TokenSeq(), node.end, node, [], [], None)
                node.children[(name,)] = child
            node = child
    return root


def _find(root: Node, *names: str) -> Node:
    for name in names:
        root = root.children[(name,)]
    return root


def test_equal_stamps_go_to_the_first_in_preorder_and_locked_leaves_wait():
    root = _tree(("a", "b"), ("d",), ("a", "c"))  # c is made after d but comes before it in preorder
    b, c, d = _find(root, "a", "b"), _find(root, "a", "c"), _find(root, "d")
    stamps = {b.id: 5, c.id: 3, d.id: 3}
    heap = marconi_lru.LeafHeap()
    for node in (d, b, c):
        heap.push(node, stamps[node.id])
    assert heap.pick(root, lambda n: stamps.get(n.id, 0)) is c
    c.full_lock = 1
    assert heap.pick(root, lambda n: stamps.get(n.id, 0)) is d
    c.full_lock = 0
    stamps[c.id] = 9
    heap.push(c, 9)
    assert heap.pick(root, lambda n: stamps.get(n.id, 0)) is d  # c's old entry at 3 is stale
