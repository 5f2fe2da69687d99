"""Marconi's recency: its logical clock and each node's last access on it (``MarconiEvictor`` reads it)."""

from __future__ import annotations

from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.node import Node


class Recency:
    """Marconi's logical clock (one tick per match, two per insert, one per eviction round) and each node's
    last access on it.

    ``whole_paths`` (SGLang+ / vLLM+, LRU over leaves): every access stamps a whole path from the root, so a
    node's last access is the latest stamp anywhere in its subtree. Such a stamp is then kept at the path's
    deepest node alone (``stamp_down_to``) and moves up to the parent when a node is deleted (``forget``):
    a leaf's stamp, the only one eviction reads, is the one stamping every node would give, without walking
    a path that grows a node per page (vLLM+ checkpoints every 32-token block: quadratic in the prompt).
    A split's new upper half has its subtree's stamp at once instead of none, but is stamped by the walk or
    insert that split it before anything reads it, and it is never a leaf (tests/test_marconi_recency.py)."""

    def __init__(self, whole_paths: bool = False) -> None:
        self.now = 0
        self.stamps: dict[int, int] = {}
        self.whole_paths = whole_paths
        # LRU over leaves (whole-path mode) reads the lowest stamp from a heap fed by every stamp written
        self.leaves = LeafHeap() if whole_paths else None

    def set(self, node: Node, stamp: int) -> None:
        self.stamps[node.id] = stamp
        if self.leaves is not None:
            self.leaves.push(node, stamp)

    def tick(self, count: int = 1) -> None:
        self.now += count

    def stamp(self, node: Node) -> None:
        self.set(node, self.now)

    def stamp_path(self, nodes, every: bool) -> None:
        """``every``: each node (a whole-path refresh); else only nodes not seen yet (new or split)."""
        for node in nodes:
            if every or node.id not in self.stamps:
                self.set(node, self.now)

    def stamp_down_to(self, node: Node) -> None:
        """Every node from the root down to ``node`` accessed now (whole-path mode: held at ``node``)."""
        if node.parent is None:
            return  # the root: an empty path
        if self.whole_paths:
            self.set(node, self.now)
        else:
            self.stamp_path(node.path_from_root(), every=True)

    def forget(self, node: Node) -> None:
        """``node`` leaves the tree: in whole-path mode its subtree's stamp stays with its parent."""
        stamp = self.stamps.pop(node.id, None)
        parent = node.parent
        if self.whole_paths and stamp is not None and parent is not None and parent.parent is not None:
            self.set(parent, max(self.stamps.get(parent.id, 0), stamp))

    def of(self, node: Node) -> int:
        return self.stamps.get(node.id, 0)
