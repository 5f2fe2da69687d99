"""SGLang 0.5.23 (``UnifiedRadixCache`` and ``ScheduleBatch``), and its retain-floor variants.

Prefill: one checkpoint per extend (``_mamba_radix_cache_v2_req_prepare_for_extend``); after every chunk
``cache_unfinished_req`` frees out-of-window SWA and inserts up to that checkpoint. Decode: the out-of-window
free (``free_swa_out_of_window_slots``) when the trigger fires, with the retain floor where the policy has
one (PR #34729). Finish (``cache_finished_req``): insert up to the last checkpoint, free the rest.
Admission, chunk caps and the decode-memory check are the scheduler's budget (``sglang_admission``).
"""

from __future__ import annotations

from sim.align import ceil_to, floor_to
from sim.cache.components import MAMBA
from sim.cache.engines.sglang_admission import SGLangAdmission
from sim.cache.engines.sglang_knobs import SGLangKnobs
from sim.cache.engines.swa_trigger import SwaTrigger
from sim.cache.matching import refresh_after_match
from sim.cache.ops import RadixOps
from sim.cache.policy import own_knobs
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class SGLangRules(SGLangAdmission):
    name = "sglang"
    split_stamps_halves = True  # UnifiedTreeCore._split_node: child.last_access_time = the current time
    insert_touches_path = True  # UnifiedTreeCore._insert_walk_step: _touch_node on every node walked

    @classmethod
    def check(cls, resolved: Resolved) -> None:
        """The server-args checks of ``arg_groups/validation_hook.py`` and ``overrides.py``."""
        policy, page = resolved.policy, resolved.page_size
        if policy.chunked_prefill_size % page:
            raise ValueError(
                f"chunked_prefill_size must be divisible by page_size (SGLang refuses it), got "
                f"{policy.chunked_prefill_size} and {page}"
            )
        chunk = resolved.mamba_chunk
        if resolved.has_mamba and max(chunk, page) % min(chunk, page):
            raise ValueError(
                f"for SSM models, either the scan's chunk or page_size must be divisible by the "
                f"other (SGLang refuses it), got mamba_chunk {chunk} and page_size {page}"
            )

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.knobs = own_knobs(self.policy, SGLangKnobs)
        self.trigger = SwaTrigger(
            self.policy.swa_free_trigger, self.policy.swa_eviction_interval, self.window
        )

    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        refresh_after_match(tree, path, node, self.window, "window")

    def frontier(self, req: RequestCache, pre_len: int, retain_floor: int | None) -> int:
        """``free_swa_out_of_window_slots``: keep ``ceil_page(max(W, page))`` below ``pre_len`` (and the
        retain floor's window below the last checkpoint); never below what the request already freed or got
        from the tree."""
        page = self.page_size
        threshold = pre_len - ceil_to(max(self.window, page), page)
        if retain_floor is not None:
            threshold = min(threshold, retain_floor)
        return floor_to(max(req.swa_frontier, req.prefix_len, threshold), page)

    def retain_floor(self, req: RequestCache, lag: int = 0) -> int | None:
        """``swa_retain_floor``: a window below the request's last tracked state (``lag``: the step that
        saved it is not processed yet, so the engine still reads the one before)."""
        mode, r = self.knobs.retain_floor, self.resolved
        if mode is None or not (r.has_swa and r.has_mamba):
            return None
        deepest = req.checkpoint[0] if req.checkpoint is not None else None
        if lag and deepest == req.kv_len:
            deepest = req.earlier_checkpoint
        if mode == "tree" and deepest is None:
            deepest = next(
                (n.end for n in reversed(req.last_node.path_from_root()) if n.state is not None), None
            )
        return None if deepest is None else deepest - self.window + r.window_slack

    admission_states = 3  # the running state and two ping-pong track slots (extra_buffer, overlap loop)

    def after_admit(self, manager: RadixOps, req: RequestCache) -> None:
        """``SWAComponent.finalize_match_result_in_tree_core``: FULL hit deeper than the SWA-valid match is a
        branch point the first insert stops at (FULL + SWA trees only; MAMBA has its own)."""
        r = self.resolved
        branch = floor_to(req.match.full_depth, self.page_size)
        if r.has_swa and not r.has_mamba and branch > req.cached_len:
            req.swa_branch = branch

    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        """``checkpoint_kv_cache`` after every chunk; a request that finishes at its prompt goes straight to
        ``release_kv_cache`` instead (its finish inserts, with no out-of-window free). A middle chunk is
        committed at the next step's scheduling (``stash_chunked_request``) in either loop; the last one when
        its result is processed (``process_batch_result_prefill``), which the overlap loop does a step late."""
        if is_last and req.output_len < 2:
            return
        if self.knobs.overlap or not is_last:
            req.commit_pending = True
        else:
            self.checkpoint_into_tree(manager, req, finished=False)

    def settle(self, manager: RadixOps, req: RequestCache, in_flight: int) -> None:
        """The held-back ``checkpoint_kv_cache`` (the committed length, not the step in flight)."""
        self.checkpoint_into_tree(manager, req, finished=False)

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        self.checkpoint_into_tree(manager, req, finished=True)

    def checkpoint_into_tree(self, manager: RadixOps, req: RequestCache, finished: bool) -> None:
        """``UnifiedRadixCache.checkpoint_into_tree``: the key ends at the checkpoint (MAMBA), the SWA branch
        point or the computed length; an unfinished request first frees SWA out of the key's window, and a
        donated checkpoint's slot is replaced (evicting a tree state if none is free)."""
        key_len = self.key_len(req, finished)
        if not finished:
            self.free_before_key(manager, req, key_len)
            if self.resolved.has_mamba and req.checkpoint is not None and key_len > 0:
                if self.reserve(manager, 0, 0, 1) is None:
                    req.spare_states.append(manager.pools[MAMBA].alloc_one())
        end = floor_to(key_len, self.page_size)
        if req.checkpoint is not None and req.checkpoint[0] == key_len != end:
            # the radix key is page-aligned but the state is the one tracked at key_len: the node ending at
            # end gets it (a continuation cut off the page grid tracks off it: mixed chunks)
            req.checkpoint = (end, req.checkpoint[1])
        if end >= req.prefix_len and end > 0:  # an insert adding nothing still walks (and stamps) the path
            manager.insert(req, end)
        if req.swa_branch is not None and end >= req.swa_branch:
            req.swa_branch = None
            if not finished:
                self.free_before_key(manager, req, req.kv_len)

    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        """``_mamba_radix_cache_v2_req_prepare_for_extend`` without DCP: tracked relative to the chunk's start,
        on the page grid or not (a continuation starts off it where mixed decode rows cut the chunk before)."""
        return self.prefill_track_position(req, chunk_len)

    def key_len(self, req: RequestCache, finished: bool) -> int:
        if self.resolved.has_mamba:
            return req.checkpoint[0] if req.checkpoint is not None else 0
        branch = req.swa_branch
        if branch is not None and req.prefix_len < branch <= req.kv_len:
            return branch
        return req.kv_len

    def free_before_key(self, manager: RadixOps, req: RequestCache, key_len: int) -> None:
        """``free_out_of_window_slots(req, key_len - 1)``, whose early return needs the frontier to move."""
        if self.resolved.has_swa and key_len - 1 - self.window >= req.swa_frontier + 1:
            manager.free_swa_below(req, self.frontier(req, key_len - 1, self.retain_floor(req)))

    def decode_checkpoint(self, req: RequestCache) -> int | None:
        """``prepare_for_decode``: a state where the sequence reaches the track grid, lcm of the scan's
        checkpoint grid and ``--mamba-track-interval``; none for a mixed batch's decode row."""
        position = req.kv_len + 1
        # decode rows of a mixed batch (decode_untracked): their track slots are dropped (mix_with_running) and
        # their result is processed as a prefill's, so the step saves no decode checkpoint
        tracked = self.resolved.has_mamba and not self.decode_untracked
        return position if tracked and position % self.resolved.track_grid == 0 else None

    def decode_free_target(self, req: RequestCache, iteration: int) -> int | None:
        """``maybe_evict_swa`` at ``req.seqlen - 1``: under the overlap loop a request whose last step is in
        flight has not appended that output yet, so its ``seqlen`` trails its KV by one."""
        lag = int(self.knobs.overlap and req.request_id in self.in_flight)
        if not self.resolved.has_swa or not self.trigger.fires(req, iteration, lag):
            return None
        return self.frontier(req, req.kv_len - lag, self.retain_floor(req, lag))

    def chunk_stalled_at(
        self, manager: RadixOps, req: RequestCache, chunk_len: int, steps_ahead: int
    ) -> bool:
        """``chunk_len``'s answer of 0 for this chunk in the pass ``steps_ahead`` plain decode steps from now.
        Those steps allocate and free nothing and take a token off what each running request owes, so only
        the pass's reservation moves, downwards: a chunk stalled at a step was stalled at every step before
        (the first chunk's cap does not move at all)."""
        if req.kv_len == req.cached_len:
            return self.first_chunk_len(req, chunk_len) <= 0
        current = self.pass_budget
        self.pass_budget = self.pass_ahead(manager, frozenset(), steps_ahead)
        stalled = self.continuation_cap(manager, req, chunk_len) is None
        self.pass_budget = current
        return stalled

    def checkpoint_free_steps(self, req: RequestCache) -> int | None:
        """Decode steps from now on that take no checkpoint, where a batch run may take the SWA frees among them
        (``sim/cache/swa_free_runs.py``: ``plain_decode_steps`` without the trigger); None where the pass has a
        step in flight (the overlap loop's: its frees lag)."""
        if self.knobs.overlap and self.in_flight:
            return None
        return -(req.kv_len + 1) % self.resolved.track_grid if self.resolved.has_mamba else 1 << 62

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        steps = -(req.kv_len + 1) % self.resolved.track_grid if self.resolved.has_mamba else 1 << 62
        return min(steps, self.swa_silent_steps(req, iteration))

    def swa_silent_steps(self, req: RequestCache, iteration: int) -> int:
        """``plain_decode_steps``' SWA term: steps from ``iteration`` on whose out-of-window free does not fire."""
        return self.trigger.silent_steps(req, iteration) if self.resolved.has_swa else 1 << 62
