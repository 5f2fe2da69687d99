"""A radix-tree node: a span of tokens and, per component, what the cache still holds for it."""

from __future__ import annotations

import itertools

from sim.cache.counted_pages import PageList
from sim.tokens import TokenSeq

_ids = itertools.count(1)


class Node:
    """Tokens ``[start, start + len(key))`` of every sequence through this node.

    ``full_pages`` always covers the span (a node whose FULL KV is evicted is deleted). ``swa_pages`` is
    ``None`` for a *tombstone*: SWA freed, FULL kept. ``state`` is the MAMBA state after the node's last
    token, or ``None``. Locks: ``full_lock`` counts requests whose path runs through the node,
    ``swa_holders`` names the requests whose sliding window rests on it, ``state_lock`` counts requests
    resumed from its state. ``cuts``: see ``tree_runs``. ``source``: the id of a request whose tokens
    (``Trace.request_seq``) begin with the node's path from the root, where its maker knew one (``misses_evicted``).
    """

    __slots__ = (
        "id",
        "key",
        "start",
        "end",
        "edge",
        "parent",
        "children",
        "full_pages",
        "swa_pages",
        "state",
        "full_lock",
        "swa_holders",
        "state_lock",
        "full_stamp",
        "swa_stamp",
        "state_stamp",
        "alive",
        "cuts",
        "stamp_step",
        "source",
    )

    def __init__(
        self,
        key: TokenSeq,
        start: int,
        parent: Node,
        full_pages: PageList,
        swa_pages: PageList | None,
        state: int | None = None,
        source: str | None = None,
        children: dict[tuple, Node] | None = None,
        swa_holders: set[str] | None = None,
    ):
        self.id = next(_ids)
        self.key = key
        self.start = start
        self.end = start + len(key)  # a split moves start and shortens the key together: end never changes
        self.parent = parent  # None for the root alone (RadixTree makes it): every walk up stops at the root
        self.edge: tuple = ()  # the key of this node in its parent's children: its first page
        # an evicted leaf's empty dict and set passed on by vLLM+'s chain (``marconi_vllm_chain_pass``): none made
        self.children: dict[tuple, Node] = {} if children is None else children
        self.full_pages = full_pages
        self.swa_pages = swa_pages
        self.state = state
        self.full_lock = 0
        self.swa_holders: set[str] = set() if swa_holders is None else swa_holders
        self.state_lock = 0
        self.full_stamp = self.state_stamp = 0
        self.swa_stamp: float = 0.0  # SGLang puts a split's upper half between two touches (RadixTree.split)
        self.alive = True
        # a run node (``tree_runs``): the ends of the pieces inside it, which the per-node tree keeps as nodes;
        # piece i of k + 1 (top first) has the stamp ``full_stamp - (k - i) * stamp_step``, the rest is the node's
        self.cuts: list[int] | None = None
        self.stamp_step = 0
        self.source = source

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def is_locked(self) -> bool:
        return self.full_lock > 0 or bool(self.swa_holders) or self.state_lock > 0

    def path_from_root(self) -> list["Node"]:
        """Nodes from the first below the root down to this one."""
        path = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            path.append(node)
            node = node.parent
        path.reverse()
        return path

    def __repr__(self) -> str:
        swa = "tomb" if self.swa_pages is None else "live"
        return f"Node#{self.id}[{self.start},{self.end}) {swa} state={self.state}"
