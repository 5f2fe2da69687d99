"""Why a match lost what it lost, watched from the cache's events while a run goes: per admission, the
blocked reasons of the ``why`` column (``sim/run/why.py``): which tombstones an eviction or a finish-time trim
made (every other one is the request's own out-of-window free), whose MAMBA state was evicted, which FULL
pages were evicted. ``TreeMissTracker`` watches a radix cache; an engine whose cache is not a tree has its own
watcher or none (its blocked ranges are then ``blocked_other``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, cast

from sim.cache import misses_evicted, misses_spans
from sim.cache.components import SWA
from sim.cache.events import (
    Admitted,
    EventBus,
    Evicting,
    Finished,
    FinishStarted,
    LeafDeleting,
    LeafEvicted,
    Matched,
    Split,
    StateDropping,
    Tombstoning,
    TombstoningRun,
)
from sim.cache.misses_evicted import put_entry, source_place, sourced_entry, was_evicted
from sim.cache.misses_hashing import fold_key, hash_chains, link_hash
from sim.cache.misses_links import blocked_by_links, blocked_on_path, forget, may_join
from sim.cache.misses_spans import EvictedSpans, add_leaf, held, in_spans, spanned
from sim.cache.node import Node
from sim.cache.reasons import (
    MAMBA_EVICTED,
    SWA_EVICTION,
    SWA_FINISH_TRIM,
    SWA_TRIGGER,
    Range,
)
from sim.cache.resolve import Resolved
from sim.cache.tree import RadixTree

# False: the blocked ranges read along a list of the match's path (``blocked_on_path``): the
# reference; True: up the parent links from its deepest node, no list made (``misses_links``)
BLOCKED_BY_LINKS = True
# Evicted prefixes kept as chains until this many are, then hashed to the ints a lookup would make: a chain keeps
# its deleted node's key alive (a 1M fan-out deletes 3M leaves: ~0.5 GB). None: kept until asked (the reference)
MAX_UNHASHED: int | None = 1 << 16
# True: a live node's link is its prefix's fold (``misses_hashing.fold_key``), an evicted prefix its int at once,
# no chain kept nor batched; False: chains and batches (``MAX_UNHASHED``), the reference
FOLD_ON_LINKS = True


@dataclass(frozen=True)
class MatchMiss:
    """What one admission's match lost, as seen at the match."""

    blocked: tuple[Range, ...] = ()  # [cached, full_depth) split by reason
    next_page_evicted: bool = False  # the page at full_depth was in the tree under this path, and evicted

    def __init__(self, blocked: tuple[Range, ...] = (), next_page_evicted: bool = False) -> None:  # native
        object.__setattr__(self, "blocked", blocked)  # frozen: as the generated one sets them
        object.__setattr__(self, "next_page_evicted", next_page_evicted)


_NO_MISS = MatchMiss()  # most matches lose nothing: one shared record for them (frozen)


class MissWatcher(Protocol):
    misses: dict[str, MatchMiss]  # request id -> what its (last) admitted match lost


@dataclass
class TreeMissTracker:
    """Subscribes to a radix cache's events and records, per admitted request, what its match lost and why."""

    tree: RadixTree
    resolved: Resolved
    events: EventBus
    # the run's ``Trace.request_seq``, where a deferred entry names its request (``misses_evicted``); None: none
    request_seq: Callable[[str], Any] | None = None
    sources: list[str] = field(default_factory=list)  # the requests sourced entries name (``sourced_entry``)
    spans: EvictedSpans = field(default_factory=EvictedSpans)  # one-page leaves' runs (``misses_spans``)
    misses: dict[str, MatchMiss] = field(default_factory=dict)
    # keyed by the node itself, not its id: compiled, an id is a new int object at every lookup (a finish trim
    # marks a hundred nodes late in a run), a node hashes by identity; a deleted node's entries are dropped
    tomb_cause: dict[Node, str] = field(default_factory=dict)  # node -> SWA_EVICTION / SWA_FINISH_TRIM
    state_evicted: dict[Node, str] = field(default_factory=dict)  # node -> MAMBA_EVICTED / SWA_EVICTION
    # an evicted node's first page (hashed) -> the prefix before it, or a list of them when several: its int, or
    # what makes it when first asked (``misses_evicted``; per evicted leaf, so kept as small as an entry can be)
    evicted_pages: dict[int, Any] = field(default_factory=dict)
    _prefix_links: dict[Node, tuple] = field(default_factory=dict)  # live node -> its chain (_prefix_link)
    unhashed: list[int] = field(default_factory=list)  # evicted_pages' keys chained since the last hashing
    _last_miss: MatchMiss = _NO_MISS  # an equal miss shares its record (a fan-out's misses are all one)
    _in_finish: bool = False
    _swa_eviction_pending: bool = False  # an SWA eviction was counted since the last tombstone
    # the leaf being deleted: its tombstone and state drop follow; no later match (live nodes only) asks
    _deleted: Node | None = None
    _pending: MatchMiss = _NO_MISS

    def __post_init__(self):
        subscribe = self.events.subscribe
        subscribe(Evicting, self._on_evicting)
        subscribe(Tombstoning, self._on_tombstone)
        subscribe(TombstoningRun, self._on_tombstone)
        subscribe(StateDropping, self._on_drop_state)
        subscribe(LeafDeleting, self._on_delete_leaf)
        subscribe(LeafEvicted, self._on_delete_leaf)  # and the three events after it (events.py)
        subscribe(Split, self._on_split)
        self.tree.merge_check = partial(may_join, self.tomb_cause, self.state_evicted)
        self.tree.on_absorbed = partial(forget, self.tomb_cause, self._prefix_links)
        subscribe(Matched, self._on_matched)
        subscribe(Admitted, self._on_admitted)
        subscribe(FinishStarted, self._on_finish_started)
        subscribe(Finished, self._on_finished)

    # ---- events ---------------------------------------------------------------------------------
    def _on_evicting(self, event: Evicting) -> None:
        if event.component == SWA:  # every eviction is counted before it tombstones its node
            self._swa_eviction_pending = True

    def _on_tombstone(self, event: Tombstoning | TombstoningRun) -> None:
        """A node's SWA is about to go, or a run's (only its first node can follow an eviction's count)."""
        nodes: list[Node] = event.nodes if isinstance(event, TombstoningRun) else [event.node]
        evicted, self._swa_eviction_pending = self._swa_eviction_pending, False
        cause = SWA_FINISH_TRIM if self._in_finish else SWA_TRIGGER
        for node in nodes:
            if node.swa_pages is not None and node is not self._deleted:
                self.tomb_cause[node] = SWA_EVICTION if evicted else cause
            evicted = False

    def _on_drop_state(self, event: StateDropping) -> None:
        node: Node = event.node
        if node.state is not None and node is not self._deleted:
            swa = node.swa_pages is None and self.tomb_cause.get(node) == SWA_EVICTION
            self.state_evicted[node] = SWA_EVICTION if swa else MAMBA_EVICTED

    def _on_delete_leaf(self, event: LeafDeleting | LeafEvicted) -> None:
        """Keyed by the tokens before the node: evicted and inserted again, a prefix is a new node."""
        node: Node = event.node
        source = node.source
        sourced = self.request_seq is not None and FOLD_ON_LINKS and misses_evicted.SOURCED
        if sourced and source is not None and misses_spans.PER_REQUEST and spanned(node, self.tree.page_size):
            add_leaf(self.spans, source_place(self.sources, source), node.start, node.end)
            self._forget(node)
            return
        if source is None:  # the parent's path is all the entry reads (``misses_evicted``)
            source = node.parent.source
        above: Any
        if source is not None and sourced:
            above = sourced_entry(self.sources, source, node.start)  # its int made where a match asks
        else:
            above = self._prefix_link(node.parent)  # chains hashed lazily: most are never asked
            above = link_hash(above) if FOLD_ON_LINKS else above
        key = hash(node.edge)
        put_entry(self.evicted_pages, key, above)
        if not FOLD_ON_LINKS:
            self.unhashed.append(key)
            if MAX_UNHASHED is not None and len(self.unhashed) > MAX_UNHASHED:
                self.hash_unhashed()
        self._forget(node)

    def _forget(self, node: Node) -> None:
        """An evicted leaf's rows dropped: no later match (live nodes only) asks for them."""
        self._prefix_links.pop(node, None)
        self.tomb_cause.pop(node, None)
        self.state_evicted.pop(node, None)
        self._deleted = node

    def _prefix_link(self, node: Node) -> tuple | None:
        """The tokens down to ``node``'s end as a chain ``(key, chain above)``, shared by the nodes of a path,
        or folded (``FOLD_ON_LINKS``), so that a path evicted leaf by leaf costs a step per node, not its depth.
        A node's tokens from the root never change (a split keeps its end and what lies above), so a link
        once made stays right."""
        links, sourced = self._prefix_links, FOLD_ON_LINKS and misses_evicted.SOURCED
        request_seq = self.request_seq if sourced else None
        chain: list[Node] = []
        while node.parent is not None and node not in links:
            if request_seq is not None and node.source is not None:  # its runs folded at once: no climb
                links[node] = fold_key(None, request_seq(node.source).slice(0, node.end))
                break
            chain.append(node)
            node = node.parent
        link: tuple | None = links.get(node)  # None: the root, an empty prefix
        for below in reversed(chain):
            link = fold_key(link, below.key) if FOLD_ON_LINKS else (below.key, link)
            links[below] = link
        return link

    def _on_split(self, event: Split) -> None:
        upper, lower = cast(Node, event.upper), cast(Node, event.lower)
        if upper.swa_pages is None and lower in self.tomb_cause:
            self.tomb_cause[upper] = self.tomb_cause[lower]

    def _on_matched(self, event: Matched) -> None:
        self._pending = self.classify(event.tokens, event.cached_len, event.full_depth)

    def _on_admitted(self, event: Admitted) -> None:
        self.misses[event.request_id] = self._pending

    def _on_finish_started(self, event: FinishStarted) -> None:
        self._in_finish = True

    def _on_finished(self, event: Finished) -> None:
        self._in_finish = False

    # ---- classification at the match ------------------------------------------------------------
    def classify(self, tokens, cached: int, full_depth: int) -> MatchMiss:
        evicted = self.evicted_at(tokens, full_depth)
        blocked: tuple[Range, ...] = ()
        if full_depth > cached:
            r, last = self.resolved, self._last_on_path(tokens, full_depth)
            tombs, states = self.tomb_cause, self.state_evicted
            if BLOCKED_BY_LINKS:
                blocked = blocked_by_links(last, cached, full_depth, r.has_swa, r.has_mamba, tombs, states)
            else:
                path = last.path_from_root()
                blocked = blocked_on_path(path, cached, full_depth, r.has_swa, r.has_mamba, tombs, states)
        if not (blocked or evicted):
            return _NO_MISS
        miss = MatchMiss(blocked, evicted)
        if miss != self._last_miss:
            self._last_miss = miss
        return self._last_miss

    def evicted_at(self, tokens, depth: int) -> bool:
        """Whether a node starting at ``depth`` after exactly these tokens was evicted: an entry, or a span's."""
        spans, page, seqs, sources = self.spans, self.tree.page_size, self.request_seq, self.sources
        if was_evicted(self.evicted_pages, tokens, depth, page, seqs, sources):
            return True
        return held(spans) and in_spans(spans, tokens, depth, page, seqs, sources)

    def hash_unhashed(self) -> None:
        hash_chains(self.evicted_pages, self.unhashed)

    def _last_on_path(self, tokens, depth: int) -> Node:
        """The node ending at ``depth`` on ``tokens``' path (the root where none), found without a walk that
        could split anything: from the walk hints' node (no tokens compared), then down the children."""
        tree = self.tree
        known = tree.hints.deepest_known(tokens, depth)
        node, page = known if known is not None else tree.root, tree.page_size
        while node.end < depth:
            child = node.children.get(tokens.first_page(page, node.end))
            if child is None or child.end > depth:
                break
            node = child
        return node
