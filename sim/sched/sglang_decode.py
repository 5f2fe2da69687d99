"""The decode half of SGLang 0.5.23's scheduler (mixed into ``SGLangScheduler``): ``update_running_batch``,
``check_decode_mem``, ``retract_decode`` and the processing of a step's results (``process_batch_result``).
The engine loop's fast path over it is ``sglang_fast``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from sim.align import ceil_div
from sim.cache.events import Retracted
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.sched.batch import Batch, BatchItem
from sim.sched.request import RequestState
from sim.sched.sglang_clock import TokenClock

RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: room a retraction frees for each request kept


class SGLangDecode:
    manager: CacheManager
    rules: Any  # SGLangRules
    waiting: deque[RequestState]
    running: list[RequestState]
    chunked: RequestState | None
    batch_is_full: bool
    given_up: list[tuple[RequestState, str]]
    _launched: Batch | None
    _done: list[RequestState]
    _known: dict[str, int]
    _last_extend: list[RequestState]
    _admitted: dict[str, RequestState]  # every request holding KV, by id
    clock: TokenClock
    mixed_chunk: bool

    def _decode(self, batch: Batch) -> None:
        """``update_running_batch``."""
        finishing = [s for s in self.running if s in self._done]
        if finishing:  # their step in flight ends them: they leave the running batch now
            self.running = [s for s in self.running if s not in finishing]
            self.batch_is_full = False
        if not self.running:
            return
        if not self._check_decode_mem(self.running):
            if finishing:  # their release at the end of this step frees room: decode the rest next step
                self.batch_is_full = False
                return
            self._retract(batch)
        self._decode_items(batch)

    def _mix_running(self, batch: Batch) -> None:
        """``--enable-mixed-chunk`` (``_get_new_batch_prefill_raw``'s tail): the running requests decode in the
        prefill batch (``mix_with_running``) unless their step in flight ends them, or ``check_decode_mem``
        finds no room after the prefill's allocation (then they sit this step out, never retracted). Mixed in,
        they leave the running batch and come back with the prefill batch's requests, after them."""
        finishing = [s for s in self.running if s in self._done]
        if finishing:  # _reqs_finishing_inflight
            self.running = [s for s in self.running if s not in finishing]
            self.batch_is_full = False
        if not self.running or not self._check_decode_mem(self.running):
            return
        self.rules.decode_untracked = True
        try:
            self._decode_items(batch)
        finally:
            self.rules.decode_untracked = False
        self._last_extend += self.running
        self.running = []

    def _decode_items(self, batch: Batch) -> None:
        """``prepare_for_decode`` for the running requests: their decode step planned into ``batch``."""
        for state in self.running:  # maybe_evict_swa, before the allocation's eviction
            self.manager.free_out_of_window(state.request_id, batch.iteration)
        self._evict_for(len(self.running))  # alloc_paged_token_slots_decode: a page per request, at once
        for state in self.running:
            plan = self.manager.prepare_decode(state.request_id, batch.iteration)
            if isinstance(plan, Refusal):
                raise AssertionError(f"{state.request_id}: check_decode_mem passed a step the pools refuse")
            batch.items.append(BatchItem(plan, False))

    def _check_decode_mem(self, states: list[RequestState]) -> bool:
        """``check_decode_mem``: a page for every request whose next token starts one, free after evicting."""
        page = self.manager.page_size
        needed = sum(1 for s in states if self.manager.requests[s.request_id].kv_len % page == 0)
        if not needed:
            return True
        return self._evict_for(needed)

    def _evict_for(self, pages: int) -> bool:
        """``evict_to_free_tokens`` for ``pages`` pages of each KV pool (the rules' ``evict_for_pages``)."""
        return self.rules.evict_for_pages(self.manager, pages)

    def _retract(self, batch: Batch) -> None:
        """``retract_decode``: fewest outputs (then longest prompt) first, until the rest fit; one is always
        kept, and aborted if even it does not fit. The batch keeps its requests in that keep order."""
        order = sorted(self.running, key=self._keep_key, reverse=True)
        first = True
        while first or not self._check_decode_mem(order):
            if len(order) == 1:
                break
            first = False
            victim = order.pop()
            self._retract_one(victim, len(order))
            self.batch_is_full = False
        if len(order) <= 1 and not self._check_decode_mem(order):
            last = order.pop()
            position = self.manager.requests[last.request_id].kv_len
            self.manager.abort(last.request_id)
            why = (
                f"aborted at position {position}: check_decode_mem fails and retract_decode keeps one request: "
                "Out of memory even after retracting all other requests in the decode batch"
            )
            self.given_up.append((last, why))
        self.running = order  # filter_batch(keep_indices=sorted_indices): the kept requests in keep order

    def _keep_key(self, state: RequestState) -> tuple[int, int]:
        """``_get_decode_retraction_order``'s key: outputs processed, then the shorter prompt."""
        return (self._outputs(state), -state.prompt_len)

    def _outputs(self, state: RequestState) -> int:
        """``len(output_ids)``: the outputs processed (a step in flight has not delivered its token)."""
        in_flight = self._launched is not None and any(
            item.plan.request_id == state.request_id for item in self._launched.items
        )
        return state.decoded + 1 - int(in_flight)

    def _retract_one(self, victim: RequestState, num_kept: int) -> None:
        """``release_req``: its KV freed (nothing inserted), room for the kept requests' next steps evicted for,
        back to the waiting queue to prefill its prompt and processed outputs again."""
        reached = self.manager.requests[victim.request_id].kv_len
        self._known[victim.request_id] = victim.prompt_len + self._outputs(victim)
        self.manager.abort(victim.request_id)
        self._evict_for(ceil_div(num_kept * RETRACT_DECODE_STEPS, self.manager.page_size))
        self.manager.events.publish(Retracted(victim.request_id, reached, "KV cache pool is full"))
        victim.num_retractions += 1
        self.waiting.append(victim)
        self.clock.entered(victim.request_id)  # _add_request_to_queue(is_retracted=True) stamps it again

    # ---- processing a step's results ----------------------------------------------------------------
    def _process(self, batch: Batch) -> bool:
        """``process_batch_result``: a prompt's last chunk is committed (``checkpoint_kv_cache``), a finished
        request released (``release_kv_cache``); a retracted request's result is dropped. True if any
        request was released."""
        done = {s.request_id for s in self._done}
        released = False
        for item in batch.items:
            request_id = item.plan.request_id
            if request_id not in self.manager.requests:  # retracted or given up on since
                continue
            if request_id in done:
                state = self._state(request_id)
                state.inserted_len = self.manager.finish(request_id).inserted_len
                released = True
            elif item.is_prefill and self._prompt_done(self._state(request_id)):
                self.manager.settle(request_id, 0)
        self._done = [s for s in self._done if s.request_id in self.manager.requests]
        return released

    def _filter_running(self) -> None:
        """``filter_batch``: the requests a processed step released leave the running batch."""
        kept = [s for s in self.running if s.request_id in self.manager.requests]
        if len(kept) < len(self.running):
            self.batch_is_full = False
        self.running = kept

    def _state(self, request_id: str) -> RequestState:
        return self._admitted[request_id]

    def _prompt_done(self, state: RequestState) -> bool:
        req = self.manager.requests.get(state.request_id)
        return req is not None and req.kv_len >= self._known.get(state.request_id, state.prompt_len)
