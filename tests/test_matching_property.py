"""``deepest_acceptable`` (scans up from a path's end, stops at the first acceptable node) and
``deepest_acceptable_above`` (the same up a node's parent links) give the same node as the rule they shortcut,
``deepest_acceptable_scan`` (root first, the whole path), on random paths of live nodes, tombstones (SWA freed)
and nodes with or without a MAMBA state, for every window and component set."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.matching import deepest_acceptable, deepest_acceptable_above, deepest_acceptable_scan
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def path_of(shapes: list[tuple[int, bool, bool]]) -> list[Node]:
    """A root-first chain of nodes: (length in tokens, live SWA, has a MAMBA state) each."""
    root = RadixTree(1, Pool("full", 0), Pool("swa", 0), Pool("state", 0)).root  # a Node wants a parent
    path: list[Node] = []
    start = 0
    for length, live, stateful in shapes:
        parent = path[-1] if path else root
        node = Node(
            TokenSeq.of("r:p", length), start, parent, [0], [0] if live else None, 1 if stateful else None
        )
        path.append(node)
        start += length
    return path


node_shapes = st.tuples(st.integers(1, 40), st.booleans(), st.booleans())


@settings(max_examples=400, deadline=None)
@given(st.lists(node_shapes, max_size=14), st.integers(-5, 120), st.booleans(), st.booleans())
def test_from_the_end_equals_the_root_first_scan(shapes, window, has_swa, has_mamba):
    path = path_of(shapes)
    assert deepest_acceptable(path, window, has_swa, has_mamba) is deepest_acceptable_scan(
        path, window, has_swa, has_mamba
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(node_shapes, min_size=1, max_size=14), st.integers(-5, 120), st.booleans(), st.booleans())
def test_up_the_links_equals_the_root_first_scan(shapes, window, has_swa, has_mamba):
    """``deepest_acceptable_above`` (from the path's last node, up its parent links) is the same rule."""
    path = path_of(shapes)
    assert deepest_acceptable_above(path[-1], window, has_swa, has_mamba) is deepest_acceptable_scan(
        path, window, has_swa, has_mamba
    )


def test_a_short_run_under_a_tombstone_falls_back_above_it():
    # live 30 | tombstone | live 10, live 10: window 25 -> the deep run holds 20 only; the first node passes
    path = path_of([(30, True, True), (5, False, True), (10, True, True), (10, True, True)])
    assert deepest_acceptable(path, 25, True, True) is path[0]
    assert deepest_acceptable(path, 20, True, True) is path[3]
    assert deepest_acceptable(path, 25, True, False) is path[0]
