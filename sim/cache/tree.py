"""The radix tree: structure, page-granular walks, splits, LRU stamps. Policy (what to keep, when a match is
acceptable) lives in the manager; this file only keeps the structure consistent and the pools' counts exact."""

from __future__ import annotations

from typing import Callable, cast

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.counted_pages import PageList
from sim.cache.events import EventBus, Evicting, LeafDeleting, Split, StateDropping, Tombstoning, emit
from sim.cache.eviction import LRUEviction, set_stamp, stamp_of
from sim.cache.node import Node
from sim.cache.page_cuts import cut_pages
from sim.cache.pools import Pool
from sim.cache.split_stamps import just_older
from sim.cache.tree_runs import around, pieces_between
from sim.cache.walk_hints import WalkHints
from sim.tokens import TokenSeq

__all__ = ["RadixTree"]


class RadixTree:
    def __init__(
        self,
        page_size: int,
        full_pool: Pool,
        swa_pool: Pool,
        state_pool: Pool,
        eviction=None,
        events: EventBus | None = None,
    ):
        self.page_size = page_size
        self.full_pool, self.swa_pool, self.state_pool = full_pool, swa_pool, state_pool
        self.root = Node(TokenSeq(), 0, None, [], [], None)  # type: ignore[arg-type]  # the one parentless node
        self.clock = 0
        self.eviction = eviction if eviction is not None else LRUEviction()
        self.leaves_only: bool = getattr(self.eviction, "leaves_only", False)  # its candidates are leaves
        self.num_full_pages = self.num_swa_pages = self.num_states = self.num_unlocked_tokens = 0
        self.num_evictions = dict.fromkeys(Component, 0)  # nodes each component's eviction walk took
        self.hints = WalkHints()  # where each sequence's last walk ended (the miss watcher reads them too)
        self.on_split: Callable[[Node, Node], None] | None = None  # lets lock holders follow a split
        # run nodes (``tree_runs``): whether two nodes may be one, and a node that was (the why watcher's)
        self.merge_check: Callable[[Node, Node], bool] | None = None
        self.on_absorbed: Callable[[Node], None] | None = None
        # SGLang's _split_node stamps both halves with the current time (the new upper half at its creation,
        # then the lower half): FULL eviction, which orders leaves by that time, sees a split leaf as new; its
        # SWA list keeps the lower half where it was and puts the upper half just behind it (older)
        self.split_stamps_halves = False
        self.owns_page_lists = False  # True: no one else holds a node's page lists (``page_cuts.cut_pages``)
        self.events = events = events if events is not None else EventBus()  # FreeToken's trim announces runs
        self._evicting, self._split = events.channel(Evicting), events.channel(Split)
        self._tombstoning, self._state_dropping = events.channel(Tombstoning), events.channel(StateDropping)
        self._leaf_deleting = events.channel(LeafDeleting)

    def walk(
        self, key: TokenSeq, end: int | None = None, start: Node | None = None, touch: bool = False
    ) -> tuple[list[Node], int]:
        """Follow ``key[:end]`` a page at a time, from the root or from ``start`` (a node on the key's path);
        a node matched part-way is split so the walk ends on a node end. Returns the nodes walked below
        the starting node and the matched (FULL) depth. ``touch``: each node reached is FULL-stamped before
        it is split (SGLang's insert walk, ``_insert_walk_step``)."""
        end = len(key) if end is None else min(end, len(key))
        node = self.root if start is None else start
        path = self.hints.climb(key, end, node)
        if touch:
            for passed in path:
                self.touch(passed, FULL)
        return self.descend(key, end, path[-1] if path else node, path, touch)

    def descend(self, key: TokenSeq, end: int, node: Node, path: list[Node], touch: bool = False):
        """``walk`` from ``node`` (on ``key``'s path; ``end <= len(key)``) down, its nodes appended to ``path``."""
        pos, page = node.end, self.page_size
        while end - pos >= page:
            child = node.children.get(key.first_page(page, pos))
            if child is None:
                break
            if touch:
                self.touch(child, FULL)
            matched = min(child.key.common_prefix_len(key, pos), end - pos) // page * page
            if matched < child.end - child.start:
                child = self.split(child, matched)
                # a run cut below its top piece: the pieces surfaced above the cut lie on the path too
                if child.parent is not node:
                    path.extend(pieces_between(node, child))
                path.append(child)
                self.hints.remember(key, child)
                return path, pos + matched
            path.append(child)
            pos += matched
            node = child
        if node is not self.root:
            self.hints.remember(key, node)
        return path, pos

    def split(self, node: Node, offset: int) -> Node:
        """Cut ``node`` at ``offset`` tokens; returns the new upper half. The MAMBA state stays below."""
        assert 0 < offset < len(node.key) and offset % self.page_size == 0
        if node.cuts is not None:  # a run node: a cut there made a node end again, or the piece holding it
            pos = node.start + offset
            for piece in around(self, node, pos):
                if piece.end == pos:
                    return piece
                if piece.start < pos < piece.end:
                    node, offset = piece, pos - piece.start
        cut, swa = offset // self.page_size, node.swa_pages
        full_head, full_tail = cut_pages(node.full_pages, cut, self.owns_page_lists)
        swa_head, swa_tail = (None, None) if swa is None else cut_pages(swa, cut, self.owns_page_lists)
        upper = Node(node.key.slice(0, offset), node.start, node.parent, full_head, swa_head)
        upper.edge = node.edge  # the upper half begins with the page the node began with
        node.parent.children[upper.edge] = upper
        node.key, node.start, node.parent = node.key.slice(offset), node.start + offset, upper
        node.full_pages, node.swa_pages = full_tail, swa_tail
        node.edge = node.key.first_page(self.page_size)
        upper.children[node.edge] = node
        upper.full_lock, upper.swa_holders = node.full_lock, set(node.swa_holders)
        upper.full_stamp, upper.swa_stamp = node.full_stamp, node.swa_stamp
        if self.split_stamps_halves:
            upper.full_stamp, node.full_stamp = self.clock + 1, self.clock + 2
            self.clock += 2
            self._push(FULL, node)
            upper.swa_stamp = just_older(upper, node.swa_stamp)
        self._push(SWA, upper)
        if self.on_split is not None:
            self.on_split(upper, node)
        if self._split:
            emit(self._split, Split(upper, node))
        return upper

    def add_leaf(
        self,
        parent: Node,
        key: TokenSeq,
        full_pages: PageList,
        swa_pages: PageList | None,
        state: int | None = None,
    ) -> Node:
        assert len(key) == len(full_pages) * self.page_size and len(key) > 0
        node = Node(key, parent.end, parent, full_pages, swa_pages, state)
        node.edge = key.first_page(self.page_size)
        parent.children[node.edge] = node
        self.num_full_pages += len(full_pages)
        self.num_unlocked_tokens += len(key)
        self.num_swa_pages += 0 if swa_pages is None else len(swa_pages)
        self.num_states += state is not None
        clock = self.clock  # stamped as three touches (FULL, SWA, STATE) would stamp it
        node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 3
        self.clock = clock + 3
        self.release(node)
        return node

    def delete_leaf(self, node: Node) -> None:
        assert node.is_leaf and not node.is_locked and node.parent is not None
        if self._leaf_deleting:
            emit(self._leaf_deleting, LeafDeleting(node))
        del node.parent.children[node.edge]
        self.full_pool.free(node.full_pages)
        self.num_full_pages -= len(node.full_pages)
        self.num_unlocked_tokens -= node.end - node.start
        self.tombstone(node)
        self.drop_state(node)
        node.alive = False
        self._push(FULL, node.parent)

    def tombstone(self, node: Node, held: list[list[int]] | None = None) -> int:
        """Free the node's SWA pages (``held``: add them there, for the caller to free); returns how many."""
        if self._tombstoning:
            emit(self._tombstoning, Tombstoning(node))
        if node.swa_pages is None:
            return 0
        freed = len(node.swa_pages)
        if held is None:
            self.swa_pool.free(node.swa_pages)
        else:
            held.append(cast("list[int]", node.swa_pages))  # held by FreeToken's rules alone: lists
        self.num_swa_pages -= freed
        node.swa_pages = None
        return freed

    def count_eviction(self, comp: Component, node: Node) -> None:
        """An eviction of ``comp`` takes ``node`` (counted, and announced before it happens)."""
        self.num_evictions[comp] += 1
        if self._evicting:
            emit(self._evicting, Evicting(comp, node))

    def revive(self, node: Node, swa_pages: PageList, stamp: bool = True) -> None:
        """``stamp``: SWA-stamp it (False: rules that keep no SWA stamp, FreeToken's one timestamp a node)."""
        assert node.swa_pages is None and len(swa_pages) == len(node.full_pages)
        node.swa_pages = swa_pages
        self.num_swa_pages += len(swa_pages)
        if stamp:
            self.touch(node, SWA)

    def drop_state(self, node: Node) -> int:
        if self._state_dropping:
            emit(self._state_dropping, StateDropping(node))
        if node.state is None:
            return 0
        self.state_pool.free([node.state])
        self.num_states -= 1
        node.state = None
        return 1

    def set_state(self, node: Node, state: int) -> None:
        assert node.state is None
        node.state = state
        self.num_states += 1
        self.touch(node, MAMBA)

    def touch(self, node: Node, comp: Component) -> None:
        self.clock += 1
        set_stamp(node, comp, self.clock)
        self._push(comp, node)

    def _push(self, comp: Component, node: Node) -> None:
        # only nodes that hold the component (FULL: leaves) can be candidates; whatever gives a node the
        # component later (revive, set_state, losing its last child) pushes it then
        if node is self.root:
            return
        if comp is FULL:
            if node.children:
                return
        elif (node.swa_pages if comp is SWA else node.state) is None:
            return
        self.eviction.push(comp, node, stamp_of(node, comp))

    def release(self, node: Node) -> None:
        """A lock on ``node`` dropped (or it is new): it may be a candidate again, for each component it holds
        (a strategy of ``leaves_only`` is not told of an inner node: FreeToken's, ~250 per request late)."""
        if node is not self.root and not (self.leaves_only and node.children):
            self.eviction.release(node)

    def pop_lru(self, comp: Component, eligible: Callable[[Node], bool]) -> Node | None:
        """The eviction strategy's next eligible candidate for ``comp``, or None."""
        return self.eviction.pop(comp, eligible)

    def dismantle(self) -> None:
        """Drop every child link, so that a tree thrown away mid-run dies by reference counting (a run pauses
        the cycle collector; with parent links alone nothing is a cycle)."""
        for node in list(self.nodes()):
            node.children = {}
        self.root.children = {}
        self.on_split = None

    def nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())
