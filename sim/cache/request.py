"""What the cache manager tracks for one running request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from sim.align import ceil_div
from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.counted_pages import CountedPages, PageList, count_in
from sim.cache.locks import LockSet
from sim.cache.node import Node
from sim.cache.pools import ANONYMOUS_ID, Pool
from sim.cache.repeats import anonymous_ids, nones
from sim.cache.results import MatchResult
from sim.tokens import TokenSeq

# False: a request's freed SWA pages are listed and handed to the pool (``drop_own_swa_below``), the reference;
# True: where the pool only counts its frees (``Pool.counts_frees``: a replay's anonymous pools), they are
# counted (tests/test_freetoken_counted_frees.py holds the two to each other)
COUNT_ANONYMOUS_FREES = True
# True: a request's lists of pages counted out of anonymous pools are ``CountedPages`` (two counts, not an entry
# per page) where the tree does not own its lists; False: lists of ``ANONYMOUS_ID`` and None, the reference
# (tests/test_counted_pages_property.py holds the two to each other). Compiled too: the lists are typed
# ``counted_pages.PageList`` (a list or counted) wherever the counted ones go, and ``CountedPages`` is native
COUNTED_PAGES = True


@dataclass
class RequestCache:
    request_id: str
    tokens: TokenSeq  # prompt + every output token (teacher-forced from the trace)
    prompt_len: int
    match: MatchResult
    locks: LockSet  # hung from the node ending at prefix_len
    page_size: int
    kv_len: int = 0  # positions whose KV is written
    prefix_len: int = 0  # [0, prefix_len) belongs to the tree (SGLang's cache_protected_len)
    own_full: PageList = field(default_factory=list)  # pages from prefix_len on
    own_swa: PageList = field(default_factory=list)  # same pages; None once freed (a prefix of it)
    swa_frontier: int = 0  # positions below it have had this request's SWA freed
    state: int | None = None  # running MAMBA state
    checkpoint: tuple[int, int] | None = None  # (position, state id) not yet handed to the tree
    planned: tuple[tuple[int, int], ...] = ()  # checkpoints the step in flight will save
    earlier_checkpoint: int | None = None  # the position ``checkpoint`` superseded (an overlap loop lags)
    spare_states: list[int] = field(default_factory=list)  # slots a checkpoint is saved into (ping-pong)
    decode_steps: int = 0
    commit_pending: bool = False  # the prefill's commit waits for the first decode step (overlap)
    swa_branch: int | None = None  # a FULL hit deeper than its SWA-valid match: the first insert stops there
    first_chunk_cap: int | None = None  # the engine's cap on the first prefill chunk, set at admission
    num_outputs_known: int = 0  # outputs a retracted request prefills again as part of its prompt

    # written out, not generated: compiled, a dataclass's generated ``__init__`` is an interpreted function
    # (mypyc keeps the dataclass machinery's), one Python frame a request; this one is native
    # (tests/test_native_inits.py holds it to the fields' defaults)
    def __init__(
        self,
        request_id: str,
        tokens: TokenSeq,
        prompt_len: int,
        match: MatchResult,
        locks: LockSet,
        page_size: int,
        kv_len: int = 0,
        prefix_len: int = 0,
    ) -> None:
        self.request_id, self.tokens, self.prompt_len, self.match = request_id, tokens, prompt_len, match
        self.locks, self.page_size, self.kv_len, self.prefix_len = locks, page_size, kv_len, prefix_len
        self.own_full, self.own_swa, self.swa_frontier, self.state = [], [], 0, None
        self.checkpoint, self.planned, self.earlier_checkpoint, self.spare_states = None, (), None, []
        self.decode_steps, self.commit_pending, self.swa_branch, self.first_chunk_cap = 0, False, None, None
        self.num_outputs_known = 0

    @property
    def last_node(self) -> Node:
        return self.locks.node

    @property
    def output_len(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def cached_len(self) -> int:
        return self.match.cached_len

    def own_page_index(self, position: int) -> int:
        """Index into own_full / own_swa of the page holding ``position``."""
        return position // self.page_size - self.prefix_len // self.page_size

    def pages_needed(self, new_kv_len: int) -> int:
        """Pages to add so that positions up to ``new_kv_len`` have a slot."""
        have = self.prefix_len // self.page_size + len(self.own_full)
        return max(0, ceil_div(new_kv_len, self.page_size) - have)

    def drop_own_swa_below(self, frontier: int) -> PageList:
        """Forget the request's own SWA pages below ``frontier`` (positions the tree owns are not its own) and
        move its frontier there; returns the pages to free."""
        live, hi = self._live_own_swa_span(frontier)
        own_swa = self.own_swa
        freed = own_swa[live:hi]  # no None among them (``_live_own_swa_span``)
        own_swa[live:hi] = [None] * (hi - live)
        self.swa_frontier = max(self.swa_frontier, frontier)
        return freed

    def free_own_swa_below(self, frontier: int, pool: Pool) -> int:
        """``drop_own_swa_below``, its pages freed to ``pool``; returns how many. Where the pool only counts its
        frees (``COUNT_ANONYMOUS_FREES``), they are counted, not listed."""
        if not (COUNT_ANONYMOUS_FREES and pool.counts_frees):
            freed = self.drop_own_swa_below(frontier)
            pool.free(freed)
            return len(freed)
        live, hi = self._live_own_swa_span(frontier)
        if live < hi:
            self.own_swa[live:hi] = nones(hi - live)
            pool.free_count(hi - live)
        self.swa_frontier = max(self.swa_frontier, frontier)
        return hi - live

    def _live_own_swa_span(self, frontier: int) -> tuple[int, int]:
        """``[live, hi)``: the own indices of the pages of positions ``max(swa_frontier, prefix_len)``, then a
        page on, ... below ``frontier`` (consecutive) that are still held: own_swa's None entries (freed) form a
        prefix (check_integrity), skipped here. Empty (``live == hi``) where there are none."""
        start = max(self.swa_frontier, self.prefix_len)
        if start >= frontier:
            return 0, 0
        first, own_swa = self.own_page_index(start), self.own_swa
        live, hi = max(first, 0), min(first + len(range(start, frontier, self.page_size)), len(own_swa))
        while live < hi and own_swa[live] is None:
            live += 1
        return live, max(live, hi)

    def drop_all(self) -> dict[Component, PageList]:
        """Forget every page and state the request holds itself; returns them, per pool, to free."""
        checkpoint = self.checkpoint[1] if self.checkpoint else None
        states = [s for s in (self.state, checkpoint) if s is not None] + [s for _, s in self.planned]
        held: dict[Component, PageList] = {
            FULL: self.own_full,
            SWA: [page for page in self.own_swa if page is not None],
            MAMBA: states + self.spare_states,
        }
        self.own_full, self.own_swa, self.state, self.checkpoint, self.planned = [], [], None, None, ()
        self.spare_states = []
        return held

    def page_tables(self) -> tuple[list[int], list[int | None]]:
        """FULL and SWA page ids of the request's positions (None where SWA is freed)."""
        full: list = []
        swa: list = []
        for node in self.last_node.path_from_root():
            full += node.full_pages
            swa += node.swa_pages if node.swa_pages is not None else [None] * len(node.full_pages)
        return full + list(self.own_full), swa + list(self.own_swa)

    def add_own_pages(self, full: list[int], swa: Sequence[int | None]) -> None:
        """Append newly allocated pages (fresh lists the request may keep: at page 1 a chunk's pages are a
        list per token, so the first chunk's become the request's own lists instead of being copied)."""
        if self.own_full:
            self.own_full += full
            self.own_swa += swa  # type: ignore[operator]  # a list or counted: either takes +=
        else:
            self.own_full, self.own_swa = full, cast("list[int | None]", swa)  # SWA ids, or None per page

    def add_anonymous_pages(self, num_pages: int, has_swa: bool, countable: bool = False) -> None:
        """``add_own_pages`` of ``num_pages`` pages counted out of anonymous pools (every id ``ANONYMOUS_ID``;
        SWA's entries None where the model has no SWA): the same lists, extended from shared runs, or, from
        the first pages on, counted (``COUNTED_PAGES``) where ``countable``: the tree does not own its lists.
        FreeToken's trees, which do, read a request's SWA entries node by node at each insert (its
        ``_revive_below``: ~2 M reads at 12,031 requests), each a Python call on a counted list: its pure
        12,031 replay ran 1.04x slower counted (0.88x at 1,000)."""
        if not self.own_full and COUNTED_PAGES and countable:
            self.own_full = CountedPages(num_pages)
            self.own_swa = CountedPages(num_pages, 0 if has_swa else num_pages)
            return
        if not self.own_full:  # the request's first pages: lists of its own, as ``add_own_pages`` keeps
            self.own_full = [ANONYMOUS_ID] * num_pages
            self.own_swa = [ANONYMOUS_ID if has_swa else None] * num_pages
            return
        if count_in(self.own_full, self.own_swa, num_pages, has_swa):
            return
        # a list or counted: either takes +=
        self.own_full += anonymous_ids(num_pages)  # type: ignore[operator]
        self.own_swa += anonymous_ids(num_pages) if has_swa else nones(num_pages)  # type: ignore[operator]

    def take_own_pages(self, end: int) -> tuple[PageList, PageList]:
        """Remove and return the own pages for ``[prefix_len, end)`` (they pass to the tree)."""
        count = (end - self.prefix_len) // self.page_size
        # the lists pass as they are and keep what stays: a commit or finish takes all or all but a page
        full, swa = self.own_full, self.own_swa
        self.own_full, self.own_swa = full[count:], swa[count:]
        del full[count:], swa[count:]
        return full, swa
