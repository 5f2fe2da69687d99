"""Why each recomputed token was recomputed: the per-request ``why`` column and its totals.

A request's prompt ``[0, P)`` splits, by position, into reused ``[0, cached)`` and recomputed ranges, each
with one reason (``REASONS``)::

    [cached, full_depth)          blocked: FULL KV was there, the match could not end there
        mamba_state               no MAMBA state at any match point past ``cached`` (never checkpointed)
        mamba_evicted             the deepest such state was there and was evicted (MAMBA pool)
        swa_trigger               the SWA window below the deepest stateful point was freed out of the window
                                  while its request ran (SGLang's decode trigger / prefill free, FreeToken's)
        swa_finish_trim           ... freed by a finish-time trim (FreeToken before #200)
        swa_eviction              ... evicted for SWA pool space
    [full_depth, floor(ideal))    FULL KV missing although an earlier request computed these tokens
        never_kept                past what the follow-up's previous turn left in the tree at its finish
        full_evicted              the next page (after the same tokens) was in the tree and was evicted
        not_cached                it never was: the earlier request still running, refused, or cut short
                                  (or it was evicted from the middle of a node: only node starts are kept)
    [floor(ideal), ideal)         page_rounding: the tree matches whole pages only
    [ideal, P)                    new: no earlier request holds them (and the last prompt token, always run)

``ideal`` is the trace's upper bound (``sim/bounds/upper_bound.py``); ``never_kept`` is its split, less the page
rounding carved out here. The blocked reasons come from watching the cache manager
(``MissTracker``): which tombstones were made by an eviction or a finish-time trim (every other tombstone
is the request's own out-of-window free), whose MAMBA state was evicted, which FULL pages were evicted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sim.cache.align import floor_to
from sim.cache.components import Component
from sim.cache.results import Refusal
from sim.tokens import TokenSeq

MAMBA_STATE, MAMBA_EVICTED = "mamba_state", "mamba_evicted"
SWA_TRIGGER, SWA_FINISH_TRIM, SWA_EVICTION = "swa_trigger", "swa_finish_trim", "swa_eviction"
NEVER_KEPT, FULL_EVICTED, NOT_CACHED = "never_kept", "full_evicted", "not_cached"
PAGE_ROUNDING, NEW = "page_rounding", "new"
BLOCKED_OTHER = "blocked_other"  # a blocked range the watched events do not explain (an engine rule not mirrored)
REASONS = {
    MAMBA_STATE: "no MAMBA state at the match point",
    MAMBA_EVICTED: "MAMBA state evicted",
    SWA_TRIGGER: "SWA freed by the trigger",
    SWA_FINISH_TRIM: "SWA freed by the finish-time trim",
    SWA_EVICTION: "SWA evicted (pool space)",
    BLOCKED_OTHER: "blocked, other",
    NEVER_KEPT: "never kept by the previous turn",
    FULL_EVICTED: "FULL evicted",
    NOT_CACHED: "not cached yet",
    PAGE_ROUNDING: "page rounding",
    NEW: "new tokens",
}
Range = tuple[int, int, str]  # [start, end) and its reason


@dataclass(frozen=True)
class MatchMiss:
    """What one admission's match lost, as seen at the match."""

    blocked: tuple[Range, ...] = ()  # [cached, full_depth) split by reason
    next_page_evicted: bool = False  # the page at full_depth was in the tree under this path, and evicted


@dataclass
class MissTracker:
    """Watches a ``CacheManager`` (by wrapping its tree's and its own methods on the instance, so the
    cache code is unchanged) and records, per admitted request, what its match lost and why."""

    manager: object
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
        self._swa_evictions_seen = tree.num_evictions[Component.SWA]
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
        evictions = self.manager.tree.num_evictions[Component.SWA]
        evicted, self._swa_evictions_seen = evictions > self._swa_evictions_seen, evictions
        if node.swa_pages is not None:  # every eviction counts itself before it tombstones its node
            self.tomb_cause[node.id] = SWA_EVICTION if evicted else SWA_FINISH_TRIM if self._in_finish \
                else SWA_TRIGGER

    def _on_drop_state(self, node) -> None:
        if node.state is not None:
            swa = node.swa_pages is None and self.tomb_cause.get(node.id) == SWA_EVICTION
            self.state_evicted[node.id] = SWA_EVICTION if swa else MAMBA_EVICTED

    def _on_delete_leaf(self, node) -> None:
        """Keyed by the tokens before the node, not by its parent node: a prefix evicted and inserted
        again later is a new node, but the same tokens."""
        keys = tuple(above.key for above in node.parent.path_from_root())  # hashed lazily: most are never asked
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


# ---- the column and its totals -------------------------------------------------------------------
def request_ranges(row, miss: MatchMiss | None, page_size: int) -> list[Range]:
    """Every recomputed range of one served request (a row of the request table), in position order."""
    cached, full_depth, prompt = int(row.cached_tokens), int(row.full_depth), int(row.prompt_tokens)
    ideal = int(row.ideal_cached_tokens)
    ranges = list(miss.blocked) if miss is not None else (
        [(cached, full_depth, BLOCKED_OTHER)] if full_depth > cached else [])
    missing_end = max(full_depth, floor_to(ideal, page_size))
    if missing_end > full_depth:
        kept = getattr(row, "previous_inserted_tokens", None)
        kept = None if kept is None or pd.isna(kept) else int(kept)
        lo = missing_end if kept is None else min(max(full_depth, kept), missing_end)
        absent = FULL_EVICTED if miss is not None and miss.next_page_evicted else NOT_CACHED
        ranges += [(full_depth, lo, absent), (lo, missing_end, NEVER_KEPT)]
    ranges += [(missing_end, max(missing_end, ideal), PAGE_ROUNDING), (max(missing_end, ideal), prompt, NEW)]
    return [r for r in ranges if r[1] > r[0]]


def format_ranges(ranges: list[Range]) -> str:
    return "; ".join(f"{reason} [{start},{end})" for start, end, reason in ranges)


def parse_ranges(text: str) -> list[Range]:
    """``format_ranges``'s text back to ranges (a stored request table's ``why`` column)."""
    ranges = []
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        reason, span = part.split(" ", 1)
        start, end = span.strip("[)").split(",")
        ranges.append((int(start), int(end), reason))
    return ranges


def with_why(requests: pd.DataFrame, tracker: MissTracker | None, page_size: int) -> pd.DataFrame:
    """The request table with its ``why`` column (empty for a request that never ran). Without a tracker
    (a cache that is not a radix tree) blocked ranges are ``blocked_other``."""
    misses = tracker.misses if tracker is not None else {}
    texts = [format_ranges(request_ranges(row, misses.get(row.id), page_size))
             if row.rejected == "" else "" for row in requests.itertuples(index=False)]
    return requests.assign(why=texts)


def why_tokens(requests: pd.DataFrame) -> dict[str, int]:
    """Recomputed tokens per reason over the served requests of a table with a ``why`` column."""
    totals = dict.fromkeys(REASONS, 0)
    served = requests[requests["rejected"] == ""] if "rejected" in requests else requests
    for text in served["why"].fillna(""):
        for start, end, reason in parse_ranges(text):
            totals[reason] = totals.get(reason, 0) + end - start
    return totals


def why_summary(requests: pd.DataFrame) -> dict[str, int]:
    """Summary keys ``why_<reason>_tokens``: they add up to ``recomputed_tokens``."""
    return {f"why_{reason}_tokens": count for reason, count in why_tokens(requests).items()}
