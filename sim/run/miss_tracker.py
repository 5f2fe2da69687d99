"""Watching the cache manager while a run goes: for each admission, what its match lost and why (the blocked
reasons of ``sim/run/why.py``): which tombstones an eviction or a finish-time trim made (every other one is
the request's own out-of-window free), whose MAMBA state was evicted, which FULL pages were evicted."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cache.components import SWA
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.run.why import (
    BLOCKED_OTHER,
    MAMBA_EVICTED,
    MAMBA_STATE,
    SWA_EVICTION,
    SWA_FINISH_TRIM,
    SWA_TRIGGER,
    Range,
)
from sim.tokens import TokenSeq


@dataclass(frozen=True)
class MatchMiss:
    """What one admission's match lost, as seen at the match."""

    blocked: tuple[Range, ...] = ()  # [cached, full_depth) split by reason
    next_page_evicted: bool = False  # the page at full_depth was in the tree under this path, and evicted


@dataclass
class MissTracker:
    """Watches a ``CacheManager`` (by wrapping its tree's and its own methods on the instance, so the
    cache code is unchanged) and records, per admitted request, what its match lost and why."""

    manager: CacheManager
    misses: dict[str, MatchMiss] = field(default_factory=dict)
    tomb_cause: dict[int, str] = field(default_factory=dict)  # node id -> SWA_EVICTION / SWA_FINISH_TRIM
    state_evicted: dict[int, str] = field(default_factory=dict)  # node id -> MAMBA_EVICTED / SWA_EVICTION
    # an evicted node's first page (hashed) -> the prefixes before it: their path's keys, hashed when first asked
    evicted_pages: dict[int, list] = field(default_factory=dict)
    _in_finish: bool = False
    _swa_evictions_seen: int = 0
    _pending: MatchMiss = MatchMiss()

    def __post_init__(self):
        tree, manager = self.manager.tree, self.manager
        self._swa_evictions_seen = tree.num_evictions[SWA]
        tree.tombstone = self._wrap(tree.tombstone, self._on_tombstone)
        tree.drop_state = self._wrap(tree.drop_state, self._on_drop_state)
        tree.delete_leaf = self._wrap(tree.delete_leaf, self._on_delete_leaf)
        follow = tree.on_split
        tree.on_split = lambda upper, lower: (self._on_split(upper, lower), follow and follow(upper, lower))
        manager.match = self._wrap_match(manager.match)
        manager.admit = self._wrap_admit(manager.admit)
        manager.finish = self._wrap_finish(manager.finish)

    @staticmethod
    def _wrap(method, before):
        def wrapped(node):
            before(node)
            return method(node)

        return wrapped

    # ---- events ---------------------------------------------------------------------------------
    def _on_tombstone(self, node) -> None:
        evictions = self.manager.tree.num_evictions[SWA]
        evicted, self._swa_evictions_seen = evictions > self._swa_evictions_seen, evictions
        if node.swa_pages is not None:  # every eviction counts itself before it tombstones its node
            self.tomb_cause[node.id] = (
                SWA_EVICTION if evicted else SWA_FINISH_TRIM if self._in_finish else SWA_TRIGGER
            )

    def _on_drop_state(self, node) -> None:
        if node.state is not None:
            swa = node.swa_pages is None and self.tomb_cause.get(node.id) == SWA_EVICTION
            self.state_evicted[node.id] = SWA_EVICTION if swa else MAMBA_EVICTED

    def _on_delete_leaf(self, node) -> None:
        """Keyed by the tokens before the node, not by its parent node: a prefix evicted and inserted
        again later is a new node, but the same tokens."""
        keys = tuple(
            above.key for above in node.parent.path_from_root()
        )  # hashed lazily: most are never asked
        self.evicted_pages.setdefault(hash(node.edge), []).append(keys)

    def _on_split(self, upper, lower) -> None:
        if upper.swa_pages is None and lower.id in self.tomb_cause:
            self.tomb_cause[upper.id] = self.tomb_cause[lower.id]

    def _wrap_match(self, match):
        def wrapped(tokens, prompt_len):
            result = match(tokens, prompt_len)
            self._pending = self.classify(tokens, result.cached_len, result.full_depth)
            return result

        return wrapped

    def _wrap_admit(self, admit):
        def wrapped(request_id, tokens, prompt_len):
            result = admit(request_id, tokens, prompt_len)
            if not isinstance(result, Refusal):
                self.misses[request_id] = self._pending
            return result

        return wrapped

    def _wrap_finish(self, finish):
        def wrapped(request_id):
            self._in_finish = True
            try:
                return finish(request_id)
            finally:
                self._in_finish = False

        return wrapped

    # ---- classification at the match ------------------------------------------------------------
    def classify(self, tokens, cached: int, full_depth: int) -> MatchMiss:
        path = self._path(tokens, full_depth)
        page = self.manager.page_size
        evicted = self._was_evicted(tokens, full_depth, page)
        blocked = self._blocked(path, cached, full_depth) if full_depth > cached else ()
        return MatchMiss(blocked, evicted)

    def _was_evicted(self, tokens, depth: int, page: int) -> bool:
        """Whether a node starting at ``depth`` after exactly these tokens was evicted."""
        prefixes = self.evicted_pages.get(hash(tokens.first_page(page, depth)))
        if not prefixes:
            return False
        wanted = hash(tokens.slice(0, depth))
        for index, prefix in enumerate(prefixes):
            if not isinstance(prefix, int):
                prefix = prefixes[index] = hash(TokenSeq([run for key in prefix for run in key.runs]))
            if prefix == wanted:
                return True
        return False

    def _path(self, tokens, depth: int) -> list:
        """The nodes from the root to the one ending at ``depth`` (the match's walk split the tree there),
        found without a walk that could split anything."""
        node, path, page = self.manager.tree.root, [], self.manager.page_size
        while node.end < depth:
            child = node.children.get(tokens.first_page(page, node.end))
            if child is None or child.end > depth:
                break
            path.append(child)
            node = child
        return path

    def _blocked(self, path: list, cached: int, full_depth: int) -> tuple[Range, ...]:
        """The deepest point past ``cached`` that meets the MAMBA rule failed on SWA (its tombstone's
        cause); past it, no MAMBA state (or an evicted one) is why."""
        resolved = self.manager.resolved
        deeper = [node for node in path if node.end > cached]
        candidates = [n for n in deeper if n.state is not None] if resolved.has_mamba else deeper
        ranges, start = [], cached
        if candidates:
            target = candidates[-1]
            cause = self._swa_cause(path, target) if resolved.has_swa else BLOCKED_OTHER
            ranges.append((cached, target.end, cause))
            start = target.end
        if start < full_depth:
            ranges += self._stateless(deeper, start, full_depth)
        return tuple(ranges)

    def _swa_cause(self, path: list, target) -> str:
        """The cause of the deepest tombstone at or above ``target``: it cut the window short."""
        for node in reversed(path[: path.index(target) + 1]):
            if node.swa_pages is None:
                return self.tomb_cause.get(node.id, SWA_TRIGGER)
        return BLOCKED_OTHER

    def _stateless(self, deeper: list, start: int, full_depth: int) -> list[Range]:
        evicted = [n for n in deeper if n.end > start and n.id in self.state_evicted]
        if not evicted:
            return [(start, full_depth, MAMBA_STATE)]
        last = evicted[-1]
        ranges = [(start, last.end, self.state_evicted[last.id])]
        return ranges + ([(last.end, full_depth, MAMBA_STATE)] if last.end < full_depth else [])
