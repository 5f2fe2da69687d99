"""What every engine's rules answer, and the parts most engines share.

The cache manager runs the lifecycle (admit -> prefill chunks -> decode steps -> finish) and owns the tree
and the pools; at each event it asks the engine's rules what to do: where the match may end, where
checkpoints land, how far a request's SWA is freed and when, what a prefill chunk and a finish commit to the
tree. A rule returns a position or calls the manager's primitives (``free_swa_below``, ``commit``,
``insert``); it never touches pools or nodes itself.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from sim.align import ceil_div, floor_to
from sim.cache.components import FULL, SWA
from sim.cache.events import EventBus
from sim.cache.eviction import LRUEviction
from sim.cache.knobs import knob
from sim.cache.matching import deepest_acceptable
from sim.cache.node import Node
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import NO_FIRST_CHUNK, MatchResult, Refusal, new_match_result, new_refusal
from sim.cache.topology import SeparatePools
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr
from sim.tokens import TokenSeq


def overlap_knob():
    """The engine's overlap loop, a knob of every engine that has one (one spec, so one CLI option): a step's
    results are processed after the next step is scheduled, so what a step leaves to the tree (a prompt's
    commit, a finish's release) lands a step later; off: the engine's non-overlap loop."""
    return knob(
        True,
        "the overlap loop: a step is processed after the next is scheduled, so a prompt's commit and a "
        "finish's release land a step later (off: the engine's plain loop)",
    )


@mypyc_attr(allow_interpreted_subclasses=True)  # an engine of its own may extend these rules
class EngineRules:
    name = ""
    keeps_cache = True  # False: the null strategy (nothing is matched or kept)
    admission_states = 1  # MAMBA states a request holds from admission: its running state (+ ping-pong slots)
    budget_before_states = False  # True: admission_refusal is asked before the admission states are reserved
    alloc_slack_pages = 0  # pages each KV pool is evicted to keep free beyond a step's need (best effort)
    requeues_lone_request = True  # False: a request retracted while running alone is given up on at once
    split_stamps_halves = False  # True: a split gives both halves a fresh FULL stamp (SGLang's _split_node)
    insert_touches_path = False  # True: an insert FULL-stamps every node it walks, root first (SGLang)
    # True: a relock one node down slides the lock set (``locks.slide``) instead of rebuilding it; only for
    # rules whose eviction ignores releases and whose cached nodes never change SWA liveness while locked
    slides_window_locks = False

    @classmethod
    def check(cls, resolved: Resolved) -> None:
        """ValueError when the engine itself refuses this configuration (its own rule, in its words)."""

    @classmethod
    def build(cls, resolved: Resolved) -> "EngineRules":
        """The rules object for a checked configuration (an engine with several caches picks one)."""
        return cls(resolved)

    def __init__(self, resolved: Resolved):
        self.resolved = resolved
        self.policy = resolved.policy
        self.page_size = resolved.page_size
        self.window = resolved.window

    # ---- admission ----------------------------------------------------------------------------------
    def match(self, tree: RadixTree, tokens: TokenSeq, prompt_len: int) -> MatchResult:
        """The deepest node every component accepts, on the walk of ``page_floor(prompt_len - 1)``."""
        if prompt_len <= 1:
            return new_match_result(0, 0, tree.root)
        path, full_depth = tree.walk(tokens, floor_to(prompt_len - 1, self.page_size))
        return self.match_walked(tree, path, full_depth)

    def match_walked(self, tree: RadixTree, path: list[Node], full_depth: int) -> MatchResult:
        """``match`` on the walk it made (a caller that needs the walk too makes it once)."""
        r = self.resolved
        best = deepest_acceptable(path, r.window - r.window_slack, r.has_swa, r.has_mamba)
        node = best if best is not None else tree.root
        self.refresh_after_match(tree, path, node)
        sound = None
        if r.window_slack:
            sound_node = deepest_acceptable(path, r.window, r.has_swa, r.has_mamba)
            sound = sound_node.end if sound_node is not None else 0
        return new_match_result(node.end, full_depth, node, sound)

    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        raise NotImplementedError

    def eviction(self):
        """The tree's eviction strategy (``sim/cache/eviction.py``)."""
        return LRUEviction()

    def topology(self, sizes, has_swa: bool, has_mamba: bool, events: EventBus):
        """The pools' layout (``sim/cache/topology.py``): FULL, SWA and MAMBA pools apart unless the engine
        lays them out otherwise; they announce their frees on ``events``."""
        return SeparatePools(sizes, has_swa, has_mamba, events)

    def begin_pass(self, manager: RadixOps, in_flight: AbstractSet[str] = frozenset()) -> None:
        """A scheduling pass starts (an engine whose admission reserves per pass resets it here;
        ``in_flight``: the requests whose last step is launched but not yet processed)."""

    def after_admit(self, manager: RadixOps, req: RequestCache) -> None:
        """Runs once a request is admitted (its path locked, its states allocated)."""

    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """Why the engine will not admit ``req`` now (its path is locked; its states reserved unless
        ``budget_before_states``), or None."""
        return None

    def reserve(self, manager: RadixOps, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """Make room for an allocation, evicting as the engine does, or say which pool cannot."""
        return manager.topology.reserve(manager.tree, full_pages, swa_pages, states)

    def evict_ahead(self, manager: RadixOps, num_pages: int) -> None:
        """Evict, as far as the tree allows, until each KV pool has ``num_pages`` and ``alloc_slack_pages``
        free (SGLang over-estimates every allocation by a page per request and evicts for it)."""
        slack = self.alloc_slack_pages
        if not slack:
            return
        target = num_pages + slack
        if manager.pools[FULL].num_free < target:
            self.reserve(manager, target, 0, 0)
        if manager.has_swa and manager.pools[SWA].num_free < target:
            self.reserve(manager, 0, target, 0)

    def takes_page_chunks(self, manager: RadixOps) -> bool:
        """Whether a request prefilling alone takes its chunks of one whole page in one loop (``page_chunks.py``):
        only rules under which such a chunk is the page, a checkpoint at its end and ``after_prefill_chunk``:
        ``begin_pass``, ``before_prefill_chunk`` and ``evict_ahead`` do nothing, ``chunk_len`` and
        ``prefill_checkpoint`` give the page and its end, ``reserve`` does nothing while every pool has the room."""
        return False

    def take_page_run(self, manager: RadixOps, req: RequestCache) -> int | Refusal | None:
        """That loop as the rules' own run (the same chunks, results and events); None: ``page_chunks.py``'s."""
        return None

    def align_chunk(self, req: RequestCache, chunk_len: int) -> int:
        """A non-final chunk's length: its end floored to a page (0: no whole page fits)."""
        return floor_to(req.kv_len + chunk_len, self.page_size) - req.kv_len

    def budgeted_chunk(self, req: RequestCache, budget: int) -> int:
        """The rest of the prompt, or a part of it the engine aligns, under a token budget."""
        remaining = req.prompt_len - req.kv_len
        chunk = min(budget, remaining)
        return self.align_chunk(req, chunk) if chunk < remaining else chunk

    def first_chunk_len(self, req: RequestCache, chunk_len: int) -> int:
        """A first chunk cut to whole pages where its paged length passes ``req.first_chunk_cap`` (the cap an
        engine's admission check sets: SGLang's ``check_prefill``)."""
        cap, page = req.first_chunk_cap, self.page_size
        if cap is not None and ceil_div(chunk_len, page) * page > cap:
            return floor_to(req.kv_len + cap, page) - req.kv_len
        return chunk_len

    def first_chunk_refusal(self, manager: RadixOps, req: RequestCache, budget: int | None) -> Refusal | None:
        """Where the scheduler gives the pass's chunk ``budget``, a request whose first chunk gets no page is
        dropped after the admission check, before its slots are taken (SGLang's ``_select_prefill_admission``
        returns OTHER; ``prepare_for_extend`` allocates them later). Only the slot its match took to copy the
        hit's MAMBA state into (``finalize_match_result_in_cache``) was evicted for, and is freed with it."""
        if budget is None:
            return None
        chunk = self.budgeted_chunk(req, budget)
        if chunk > 0 and self.first_chunk_len(req, chunk) > 0:
            return None
        if self.resolved.has_mamba and req.match.cached_len:
            self.reserve(manager, 0, 0, 1)
        return new_refusal(NO_FIRST_CHUNK, self.page_size, chunk, "no page of its first chunk fits the pass")

    def chunk_len(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        """The engine's own cap on a prefill chunk the budget allows (0: none this step)."""
        return chunk_len

    def chunk_stalled_at(
        self, manager: RadixOps, req: RequestCache, chunk_len: int, steps_ahead: int
    ) -> bool:
        """Whether ``chunk_len`` would size this chunk to nothing in the pass ``steps_ahead`` plain decode
        steps of the other requests from now (a loop without overlap). False: it gives the chunk back."""
        return False

    # ---- prefill ------------------------------------------------------------------------------------
    def before_prefill_chunk(self, manager: RadixOps, req: RequestCache) -> None:
        """Runs before a chunk's pages are reserved."""

    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        """``prefill_track_position``, where it lands on a page."""
        position = self.prefill_track_position(req, chunk_len)
        return position if position is not None and position % self.page_size == 0 else None

    def prefill_track_position(self, req: RequestCache, chunk_len: int) -> int | None:
        """One checkpoint per extend at its last grid point from the chunk's start, or at the branching point
        inside it."""
        grid, start = self.resolved.checkpoint_grid, req.kv_len
        if not self.resolved.has_mamba or chunk_len < grid:
            return None
        position = start + chunk_len // grid * grid
        branch = req.match.full_depth // grid * grid
        if branch > req.cached_len and start < branch < start + chunk_len and (branch - start) % grid == 0:
            position = branch
        return position

    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        raise NotImplementedError

    # ---- decode -------------------------------------------------------------------------------------
    def decode_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """Why the engine will not run the request's next decode step, asked before the step frees or
        reserves anything (None: it runs)."""
        return None

    def decode_free_target(self, req: RequestCache, iteration: int) -> int | None:
        """The SWA frontier this decode step frees the request to, or None (nothing freed)."""
        return None

    def settle(self, manager: RadixOps, req: RequestCache, in_flight: int) -> None:
        """The loop processed the step that ended ``req``'s prompt, whose commit the rules held back
        (``req.commit_pending``), after launching the next step (``in_flight``: its tokens of that step)."""

    def decode_checkpoint(self, req: RequestCache) -> int | None:
        position = req.kv_len + 1
        has_mamba = self.resolved.has_mamba
        return position if has_mamba and position % self.policy.track_interval == 0 else None

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        """Decode steps from ``iteration`` on that take no checkpoint and free no SWA (closed forms of
        ``decode_checkpoint`` and ``decode_free_target``; the manager adds the page bound)."""
        if self.resolved.has_mamba:
            return -(req.kv_len + 1) % self.policy.track_interval
        return 1 << 62

    # ---- commit and finish --------------------------------------------------------------------------
    def insert_len(self, req: RequestCache) -> int | None:
        """How much of the request the tree can take now: up to its last checkpoint (MAMBA models),
        else every whole page it computed."""
        if self.resolved.has_mamba:
            return req.checkpoint[0] if req.checkpoint is not None else None
        return floor_to(req.kv_len, self.page_size)

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        """Commit what the finished request leaves to the tree (before its own pages are released)."""
        end = self.insert_len(req)
        if end is not None and end > req.prefix_len:
            manager.insert(req, end)

    def after_release(self, manager: RadixOps, req: RequestCache) -> None:
        """Runs once the finished request's pages and locks are released."""
