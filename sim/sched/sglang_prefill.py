"""The admission and allocation halves of SGLang's prefill pass (mixed into ``SGLangScheduler``): the waiting
requests asked in the schedule policy's order (``PrefillAdder.add_one_req``, ``get_num_allocatable_reqs``), the
admitted ones taken off the queue, then ``prepare_for_extend``'s eviction and each chunk's pages.

``LEAN_PASS`` (on) takes the pass with what it can carry: the allocatable requests are worked out once a pass
(each admission adds a row and a held row at once, so ``get_num_allocatable_reqs`` cannot change inside it), the
queue is read without a copy (nothing in the pass changes it), the admitted requests, its head in order, are
popped off its left, and the eviction's room is summed in one loop. Off: the pass as first written, asking
``_allocatable`` before every request, the reference (``tests/test_sglang_lean_pass_property.py``).
"""

from __future__ import annotations

from sim.align import ceil_div
from sim.cache.results import NO_FIRST_CHUNK, Refusal
from sim.sched.batch import Batch, BatchItem
from sim.sched.request import RequestState
from sim.sched.sglang_fast import SGLangFastPath

LEAN_PASS = True


class SGLangPrefill(SGLangFastPath):
    max_running: int

    def _admit_and_allocate(self, batch: Batch, added: list[tuple[RequestState, int]]) -> None:
        """The waiting requests admitted after the chunked one, taken off the queue, then every chunk's pages."""
        if LEAN_PASS:
            self._admit_waiting_lean(added)
            waiting = self.waiting
            for state, _ in added:
                if waiting and waiting[0] is state:  # the admitted requests are the queue's head, in order
                    waiting.popleft()
                elif state in waiting:
                    waiting.remove(state)
            self._allocate_lean(batch, added)
            return
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

    def _admit_waiting_lean(self, added: list[tuple[RequestState, int]]) -> None:
        """``_admit_waiting`` with the allocatable requests asked once: a request ``_add_one`` lets
        ``continue`` is added and holds a row, so the rows taken and held rise together."""
        requests = self.manager.requests
        held = 0
        for s, _ in added:
            if s.request_id in requests:
                held += 1
        allocatable = self._allocatable(held)
        first = True
        for state in self.waiting:  # nothing in the pass changes the queue (a change would raise here)
            if first:
                first = False
                if self.rules.budget_state(self.manager) == "other":  # then: _add_one's "continue"
                    return
            if len(added) >= allocatable:
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

    def _allocate_lean(self, batch: Batch, added: list[tuple[RequestState, int]]) -> None:
        """``_allocate`` with the room summed in one loop, and a chunk's prompt end read only for the chunked
        request."""
        if not added:
            return
        manager, items = self.manager, batch.items
        page = manager.page_size
        tokens = len(added) * page if page > 1 else 0
        for _, chunk in added:
            tokens += chunk
        self._evict_for(ceil_div(tokens, page))
        for state, chunk in added:
            plan = manager.prepare_prefill(state.request_id, chunk, batch.iteration)
            if isinstance(plan, Refusal):
                raise AssertionError(
                    f"{state.request_id}: the budget admitted a chunk the pools refuse ({plan})"
                )
            items.append(BatchItem(plan, True, state.copy_state_from))
            state.copy_state_from = None
            if state is self.chunked and plan.end >= self._known.get(state.request_id, state.prompt_len):
                self.chunked = None

    def _allocatable(self, held: int) -> int:
        """``get_num_allocatable_reqs``: running slots left, and request rows left (a chunked request holds
        its row across chunks)."""
        rows_free = self.max_running - len(self.manager.requests) + held
        return min(self.max_running - len(self.running), rows_free)
