"""SGLang 0.5.23's scheduler (``managers/scheduler.py``: ``event_loop_overlap``, ``get_next_batch_to_run``): a
prefill batch whenever the prefill pass yields one, else a decode batch of the running requests.

Each step (``get_next_batch_to_run``): the chunked request's last chunk reaches the tree
(``stash_chunked_request``); the last prefill batch's other requests join the running batch, whose requests the
processed steps finished leave it; then the prefill pass (``_get_new_batch_prefill_raw``): the chunked request's
next chunk first (``add_chunked_req``), then waiting requests in the schedule policy's order
(``calc_priority``: ``sglang_policy``; FCFS by default) while rows are free
(``get_num_allocatable_reqs``) and the ``PrefillAdder`` budget lasts (``add_one_req``; the first that does not fit
ends the pass and marks the batch full). Without a prefill batch, the decode batch (``update_running_batch``):
requests whose step in flight ends them by length sit it out, and where the pool cannot back the step
(``check_decode_mem``) the batch waits for their release, or requests are retracted (``retract_decode``: fewest
outputs first) until it can, the last one aborted if even it cannot. With the overlap loop (the default) a step
is processed after the next is scheduled (``process_batch_result``): a prompt's commit and a finish's release
land then. The decode half is ``sglang_decode``, the engine loop's fast path ``sglang_fast``.
"""

from __future__ import annotations

from collections import deque

from sim.align import ceil_div
from sim.cache.engines.sglang_budget import max_new_tokens_for_memory
from sim.cache.manager import CacheManager
from sim.cache.results import NO_FIRST_CHUNK, Refusal
from sim.sched.batch import Batch, BatchItem, StepOutcome
from sim.sched.request import RequestState
from sim.sched.sglang_clock import TokenClock
from sim.sched.sglang_fast import SGLangFastPath
from sim.sched.sglang_policy import scheduler_order


class SGLangScheduler(SGLangFastPath):
    def __init__(
        self,
        manager: CacheManager,
        max_running: int,
        overlap: bool,
        schedule_policy: str = "fcfs",
        mixed_chunk: bool = False,
    ):
        self.manager, self.rules = manager, manager.rules
        self.max_running, self.overlap, self.mixed_chunk = max_running, overlap, mixed_chunk
        self.clock = TokenClock()  # processed_tokens_counter, for hrrn
        self.waiting = deque()
        self.running = []  # the running batch: requests past their prompt
        self.chunked = None
        self.parked: list[RequestState] = []  # nothing is parked: retraction requeues at once
        self.given_up = []
        self.batch_is_full = False
        # the last prefill batch's requests, merged into the running batch at the next step
        self._last_extend = []
        self._launched = None  # overlap: the step run, not yet processed
        self._done = []  # finished by length in that step
        self._known = {}  # a retracted request's tokens to prefill again (prompt + outputs)
        self._admitted = {}  # every request holding KV, by id
        self._batch_run_at = None  # the fast path's batch run starts here (None: plain steps)
        self._finishing_steps = 0  # ... and, taking this many steps, ends requests at its last (0: none)
        self._max_new: dict[str, int] = {}  # max_new_tokens as clipped at arrival (0 possible)
        self.order = scheduler_order(schedule_policy, manager, self._known, self._max_new, self.clock)

    def add(self, state: RequestState) -> None:
        page = self.manager.page_size
        full_pool_tokens = self.manager.sizes.full_pages * page
        clipped = max_new_tokens_for_memory(state.prompt_len, state.output_len, full_pool_tokens, page)
        state.output_len = max(1, clipped)  # init_req_max_new_tokens: SGLang generates no more than this
        self._max_new[state.request_id] = clipped
        if state.tokens is not None:
            state.tokens = state.tokens.slice(0, state.prompt_len + state.output_len)
        self.waiting.append(state)
        self.clock.entered(state.request_id)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked or self._launched or self._last_extend)

    def schedule(self, iteration: int) -> Batch:
        """One loop iteration, and at once the next where this one launched nothing but released memory (a
        processed step's finishes, or the decode batch's last request aborted)."""
        num_given_up = len(self.given_up)
        batch = self._launch(iteration)
        released = len(self.given_up) > num_given_up
        if self._launched is not None:
            released |= self._process(self._launched)
        if released and not batch:
            batch = self._launch(iteration)
        self._launched = batch if (self.overlap and batch) else None
        self.clock.launched(batch)
        return batch

    def postprocess(self, batch: Batch) -> StepOutcome:
        first_tokens: list[RequestState] = []
        for item in batch.items:
            state = self._state(item.plan.request_id)
            tokens = item.plan.end - item.plan.start
            if item.is_prefill:
                self.manager.complete_prefill(state.request_id, tokens)
                if item.plan.end == state.prompt_len:
                    first_tokens.append(state)
                if item.plan.end == self._known.get(state.request_id):  # outputs prefilled again
                    state.decoded = self._known.pop(state.request_id) - state.prompt_len
            else:
                self.manager.complete_decode(state.request_id)
                state.decoded += 1
            if self._prompt_done(state) and state.decoded >= state.output_len - 1:
                self._done.append(state)
        finished = list(self._done)
        if not self.overlap:
            self._process(batch)
        return StepOutcome(first_tokens, finished)

    def park_newest(self) -> bool:
        """Nothing could be scheduled: a chunked prefill no pass continues, with nothing else running, waits
        forever in SGLang; it is given up on (a waiting head the engine gives up on itself)."""
        if self.chunked is None or self.running:
            return False
        state, self.chunked = self.chunked, None
        position = self.manager.requests[state.request_id].kv_len
        self.manager.abort(state.request_id)
        why = f"stalled mid prefill: no prefill chunk fits at position {position} on an idle server"
        self.given_up.append((state, why + " (SGLang waits forever)"))
        return True

    def unpark(self) -> None:
        pass

    def _launch(self, iteration: int) -> Batch:
        batch = Batch(iteration)
        in_flight = (
            frozenset(i.plan.request_id for i in self._launched.items) if self._launched else frozenset()
        )
        if self.chunked is not None and self.chunked.request_id in self.manager.requests:
            self.manager.settle(self.chunked.request_id, 0)  # stash_chunked_request
        merged = [
            s for s in self._last_extend if s is not self.chunked and s.request_id in self.manager.requests
        ]
        if len(merged) < len(self._last_extend):  # filter_batch shrank the last batch: room for more
            self.batch_is_full = False
        self.clock.joined_running(bool(merged) and not self.running)
        if merged and not self.running:  # running_batch = last_batch: the new batch's flag
            self.batch_is_full = False
        self.running += merged
        self._last_extend = []
        self._filter_running()
        self.manager.begin_pass(in_flight)
        if self.mixed_chunk:  # PrefillAdder(num_mixed_decode_tokens=running_bs)
            self.rules.reserve_mixed_decode(len(self.running))
        self._prefill(batch)
        if batch.items:
            self._last_extend = [self._state(item.plan.request_id) for item in batch.items]
            if self.mixed_chunk and self.running:
                self._mix_running(batch)
        else:
            self._decode(batch)
        return batch

    def _prefill(self, batch: Batch) -> None:
        if self.manager.has_swa or not self.running:
            self.batch_is_full = False  # hybrid SWA retries admission every pass; an empty batch has room
        if (self.batch_is_full or not self.waiting) and self.chunked is None:
            return
        if self._allocatable(0) <= 0 and self.chunked is None:
            self.batch_is_full = True
            return
        self.order.calc_priority(self.waiting)  # SchedulePolicy.calc_priority
        added: list[tuple[RequestState, int]] = []
        if self.chunked is not None:
            chunk = self.manager.next_chunk_len(self.chunked.request_id, self.rules.pass_budget.chunk)
            if chunk > 0:
                added.append((self.chunked, chunk))
        self._admit_waiting(added)
        for state, _ in added:
            if state in self.waiting:
                self.waiting.remove(state)
        self._allocate(batch, added)

    def _admit_waiting(self, added: list[tuple[RequestState, int]]) -> None:
        for index, state in enumerate(list(self.waiting)):
            if not index and self.rules.budget_state(self.manager) == "other":  # then: _add_one's "continue"
                return
            held = sum(1 for s, _ in added if s.request_id in self.manager.requests)
            if len(added) >= self._allocatable(held):
                self.batch_is_full = True
                return
            verdict = self._add_one(state, added)
            if verdict != "continue":
                if verdict == "no_token":
                    self.batch_is_full = bool(added) or bool(self.running)
                return

    def _add_one(self, state: RequestState, added: list[tuple[RequestState, int]]) -> str:
        """``add_one_req``: ``no_token`` where the budget refuses, ``other`` where no chunk fits (before a slot
        is taken), else the budget's state once the request is added."""
        assert state.tokens is not None, "a request is queued with its tokens"
        known, budget = self._known.get(state.request_id, state.prompt_len), self.rules.pass_budget.chunk
        result = self.manager.admit(state.request_id, state.tokens, known, budget)
        if isinstance(result, Refusal):
            state.last_refusal = str(result)
            return "other" if result.pool == NO_FIRST_CHUNK else "no_token"
        self.manager.requests[state.request_id].num_outputs_known = known - state.prompt_len
        chunk = self.manager.next_chunk_len(state.request_id, budget)
        if chunk <= 0:
            self.manager.abort(state.request_id)
            return "other"
        if state.match is None:  # SGLang reports the first admission's hit
            state.match = result.match
        self._admitted[state.request_id] = state
        state.copy_state_from = result.copy_state_from
        added.append((state, chunk))
        if self.manager.requests[state.request_id].kv_len + chunk < known:
            self.chunked = state
        return self.rules.budget_state(self.manager)

    def _allocate(self, batch: Batch, added: list[tuple[RequestState, int]]) -> None:
        """``prepare_for_extend``: room evicted for every chunk at once, plus a page per request where pages
        are longer than a token (``alloc_paged_token_slots_extend``; ``alloc_token_slots`` asks only the
        chunks), then each chunk's pages; a request whose last chunk this is leaves ``chunked``."""
        if added:
            page = self.manager.page_size
            slack = len(added) * page if page > 1 else 0
            room = ceil_div(sum(chunk for _, chunk in added) + slack, page)
            self._evict_for(room)
        for state, chunk in added:
            plan = self.manager.prepare_prefill(state.request_id, chunk, batch.iteration)
            if isinstance(plan, Refusal):
                raise AssertionError(
                    f"{state.request_id}: the budget admitted a chunk the pools refuse ({plan})"
                )
            batch.items.append(BatchItem(plan, True, state.copy_state_from))
            state.copy_state_from = None
            known = self._known.get(state.request_id, state.prompt_len)
            if state is self.chunked and plan.end >= known:
                self.chunked = None

    def _allocatable(self, held: int) -> int:
        """``get_num_allocatable_reqs``: running slots left, and request rows left (a chunked request holds
        its row across chunks)."""
        rows_free = self.max_running - len(self.manager.requests) + held
        return min(self.max_running - len(self.running), rows_free)
