"""The null strategy: no prefix cache (SGLang ``--disable-radix-cache``: ``UnifiedRadixCache(disable=True)``).
Nothing is matched, committed or kept. Running requests still free out-of-window SWA as SGLang's do where the
cache does not share prefixes (``free_swa_out_of_window_slots(supports_prefix_sharing=False)``): at every decode
step's trigger and at every extend batch (``maybe_evict_swa``), down to the window itself, not a page-rounded
one; ``checkpoint_into_tree`` returns before it frees anything. Admission is ``add_one_req_ignore_eos``. A
request holds one MAMBA state and tracks no checkpoint (``mamba_extra_buffer_of`` is False)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from operator import itemgetter

import sim.cache.engines.sglang_budget as budget
from sim.align import floor_to
from sim.cache.components import FULL, SWA
from sim.cache.engines.nocache_states import State, decode_fits, insert_state
from sim.cache.engines.sglang import SGLangRules
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import MatchResult, Refusal, new_match_result, new_refusal
from sim.compiled_core import mypyc_attr

# under hybrid SWA the pass's ``req_states`` (and the requests charged, which only they read) are not gathered:
# ``add_one_req_ignore_eos`` skips their check there, so nothing reads them (off: gathered at every admission and
# charge, the reference; tests/test_nocache_lean_pass_property.py)
SWA_SKIPS_STATES = True


@mypyc_attr(allow_interpreted_subclasses=True)
class NoCacheRules(SGLangRules):
    name = "none"
    keeps_cache = False
    # mamba_extra_buffer_of is False with the radix cache disabled: a request holds its running state alone
    # and tracks no checkpoint (no ping-pong slots, nothing published)
    admission_states = 1

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.extend_batches: dict[str, int] = {}  # Req.extend_batch_idx: extend batches since admission
        # PrefillAdder.req_states: (decode left, tokens held) of the pass's requests, sorted by decode left;
        # None until the pass's first admission check builds it
        self.req_states: list[tuple[int, int]] | None = None
        self.pass_added: list[RequestCache] = []  # PrefillAdder.can_run_list: the requests charged this pass

    def begin_pass(self, manager: RadixOps, in_flight: AbstractSet[str] = frozenset()) -> None:
        super().begin_pass(manager, in_flight)
        self.req_states, self.pass_added = None, []

    def charge(self, req: RequestCache, chunk_len: int) -> None:
        super().charge(req, chunk_len)
        if not (SWA_SKIPS_STATES and self.swa_budget):
            self.pass_added.append(req)

    def match(self, tree, tokens, prompt_len) -> MatchResult:
        return new_match_result(0, 0, tree.root)

    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """``add_one_req_ignore_eos`` (a trace's outputs are fixed, as with ``ignore_eos``, and the tree is
        disabled): the whole paged prompt and a page against the FULL budget (no decode), the SWA estimate at
        most what is left (not below it); no SWA cap on the first chunk."""
        page, extend_len = self.page_size, req.prompt_len - req.kv_len
        paged_input = budget.ceil_page(extend_len, page) + page
        remaining_total = self._remaining_total(manager, req, paged_input)
        if paged_input > remaining_total:
            return budget.no_token(FULL.pool_name, paged_input, remaining_total)
        max_new = budget.clipped_new_tokens(self._max_new(req))
        needed_swa = budget.estimate_swa_kv_tokens(
            extend_len, max_new, self.window, page, self.pass_budget.chunk
        )
        remaining_swa = self._remaining_swa(manager, req, needed_swa)
        if remaining_swa is not None and needed_swa > remaining_swa:
            return budget.no_token(SWA.pool_name, needed_swa, remaining_swa)
        if not (SWA_SKIPS_STATES and self.swa_budget):
            self._add_req_state(manager, req)
        if not self.swa_budget:  # hybrid SWA skips the check: its estimate undercounts SWA's memory
            refusal = self._decode_refusal(manager, paged_input)
            if refusal is not None:
                return refusal
        req.first_chunk_cap = None
        return None

    def _add_req_state(self, manager: RadixOps, req: RequestCache) -> None:
        """``add_req_state``: the pass's first check lists the request, the running batch and the requests
        charged so far (sorted, stably); a later one inserts its request. A request owing nothing is left out."""
        if self.req_states is not None:
            state = self._waiting_state(req)
            if state[0] > 0:
                insert_state(self.req_states, state)
            return
        states = [self._waiting_state(req)]
        states += [self._running_state(r) for r in manager.requests.values() if r.kv_len >= r.prompt_len]
        states += [self._waiting_state(r) for r in self.pass_added]
        self.req_states = sorted((s for s in states if s[0] > 0), key=itemgetter(0))

    def _waiting_state(self, req: RequestCache) -> State:
        """A request still to prefill: it owes its whole decode and holds its prompt (a retracted one's known
        outputs are both ``output_ids`` and part of its prompt here)."""
        return (self._max_new(req), req.prompt_len)

    def _running_state(self, req: RequestCache) -> State:
        """A running request: its ``max_new_tokens`` less its outputs so far (one not yet processed where its
        step is in flight); it holds its prompt and those outputs."""
        max_new = self._max_new(req)
        tokens_left = max_new - 1 - req.decode_steps + (req.request_id in self.in_flight)
        return (tokens_left, req.prompt_len + max_new - tokens_left)

    def _decode_refusal(self, manager: RadixOps, paged_input: int) -> Refusal | None:
        """NO_TOKEN where the running requests' decode would not fit after this one's prompt (the disabled
        tree holds nothing, so ``remaining_current`` is the free tokens less the pass's current offset)."""
        assert self.req_states is not None
        cur_rem_tokens = self.free_tokens(manager, swa=False) - self.pass_budget.current - paged_input
        if decode_fits(self.req_states, cur_rem_tokens):
            return None
        owed = sum(tokens_left for tokens_left, _ in self.req_states)
        why = (
            f"SGLang's PrefillAdder answers NO_TOKEN (add_one_req_ignore_eos): the {len(self.req_states)} "
            f"requests' decode still owed ({owed} tokens, the shortest first, each freeing what it holds once "
            f"done) does not fit in the {cur_rem_tokens} tokens left beside its paged prompt of {paged_input}"
        )
        return new_refusal(FULL.pool_name, paged_input + owed, cur_rem_tokens + paged_input, why)

    def align_chunk(self, req: RequestCache, chunk_len: int) -> int:
        """``add_one_req_ignore_eos`` cuts a first chunk where the pass's chunk budget ends, off the page grid
        (``floor_chunked_tokens``' grid is 1 without DCP), as ``add_chunked_req`` cuts a later one."""
        return chunk_len

    def frontier(self, req: RequestCache, pre_len: int, retain_floor: int | None) -> int:
        """Without prefix sharing the free keeps the window itself (no page-rounded one, no retain floor)."""
        return floor_to(max(req.swa_frontier, req.prefix_len, pre_len - self.window), self.page_size)

    def after_admit(self, manager: RadixOps, req: RequestCache) -> None:
        self.extend_batches[req.request_id] = (
            0  # a retracted request starts again at 0 (Req.reset_for_retract)
        )

    def before_prefill_chunk(self, manager: RadixOps, req: RequestCache) -> None:
        """``maybe_evict_swa`` of an extend batch: below the chunk's start; the overlap loop from the request's
        third extend on, a chunk further back (the one before is still running)."""
        done = self.extend_batches[req.request_id]
        self.extend_batches[req.request_id] = done + 1
        pre_len = req.kv_len
        if self.knobs.overlap:
            if done < 2:
                return
            pre_len -= self.policy.chunked_prefill_size
        if self.resolved.has_swa and pre_len - self.window > req.swa_frontier:
            manager.free_swa_below(req, self.frontier(req, pre_len, None))

    def prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        return None

    def decode_checkpoint(self, req: RequestCache) -> int | None:
        return None

    def checkpoint_free_steps(self, req: RequestCache) -> int | None:
        return None if self.knobs.overlap and self.in_flight else 1 << 62

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        return self.swa_silent_steps(req, iteration)

    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        pass

    def finish(self, manager: RadixOps, req: RequestCache) -> None:
        self.extend_batches.pop(req.request_id, None)
