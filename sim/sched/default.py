"""Batch formation, as engines do it: pure Python, no time.

Each step: running requests in decode get one token each, then prefill chunks (unfinished prompts first,
then FCFS admission) share what is left of the ``chunked_prefill_size`` token budget. Admission is capped by
``max_running_requests`` and by the pools: the cache manager evicts what it can and refuses otherwise, and a
refused request waits. A decode step short of memory retracts the newest running request (freed, requeued at
the head) as SGLang does; one retracted running alone is requeued, or given up on where the engine does so.
"""

from __future__ import annotations

import itertools
from collections import deque

from sim.cache.engines.marconi_vllm_steady import commit_steady
from sim.cache.engines.marconi_vllm_step import end_step
from sim.cache.interface import CacheModel
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.sched.batch import Batch, BatchItem, FullStep, StepOutcome
from sim.sched.capped_stalls import CappedStalls
from sim.sched.chunk_ahead import budget_left_by_decodes, takes_chunk_next
from sim.sched.last_output import LastOutputSteps
from sim.sched.loop_runs import chunk_stays_stalled
from sim.sched.plain_runs import plain_steps
from sim.sched.request import RequestState
from sim.sched.retraction import retract
from sim.sched.running_order import admission_order_of, newest_of, oldest_first
from sim.sched.steady_chunks import add_steady, commit_rules, open_steady, step_of

# False: prompts are asked for a chunk after the budget is spent (the reference; tests/test_spent_budget.py)
STOP_WHEN_SPENT = True


class DefaultScheduler:
    def __init__(self, manager: CacheModel, chunked_prefill_size: int, max_running_requests: int):
        self.manager = manager
        self.budget = chunked_prefill_size
        self.max_running = max_running_requests
        self.waiting: deque[RequestState] = deque()
        self.running: dict[str, RequestState] = {}
        # retracted running alone, and no further the next time: a livelock, given up with the pools' reason
        self.given_up: list[tuple[RequestState, str]] = []
        # retracted as nothing could be scheduled: not admitted again until a step succeeds or nothing runs
        self.parked: list[RequestState] = []
        self._counter = itertools.count()
        # the radix manager's batch decode runs (timed mode): where the fast path last chose one, its start
        self._radix = manager if isinstance(manager, CacheManager) else None
        self._batch_run_at: int | None = None
        self._capped = CappedStalls(self._radix)  # first chunks no budget sizes, as far as it can say
        self._last_output = LastOutputSteps(self._radix)  # batch runs, through last outputs if none listens
        self._step = step_of(self._radix)  # vLLM+'s step hold and rules (``marconi_vllm_step.py``), or None

    def add(self, state: RequestState) -> None:
        self.waiting.append(state)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.parked)

    def schedule(self, iteration: int) -> Batch:
        batch = Batch(iteration)
        self.manager.begin_pass()
        budget = self._schedule_decodes(batch)
        step = self._step
        steady = open_steady(step, self._radix)  # the hold opened; where page chunks plan in one call
        for run in self._capped.untold(self.running, self.manager.requests):
            if budget <= 0 and STOP_WHEN_SPENT:
                break  # no spent budget sizes a chunk (``budgeted_chunk``) nor records a stall (``_stall``)
            left = add_steady(steady, self._capped, batch, run, budget) if steady is not None else None
            budget = self._add_prefill(batch, run, budget) if left is None else left
        if step is not None:
            end_step(*step)
        while budget > 0 and self.waiting and len(self.running) < self.max_running:
            admitted = self._admit_head()
            if admitted is None:
                break
            budget = self._add_prefill(batch, admitted, budget)
        return batch

    def newest_running(self) -> RequestState | None:
        return newest_of(self.running)

    def park_newest(self) -> bool:
        """Free the newest running request and hold it back until ``unpark``; False when nothing runs."""
        newest = self.newest_running()
        if newest is None:
            return False
        self._retract(newest, newest.last_refusal or "nothing could be scheduled")
        if self.waiting and self.waiting[0] is newest:
            self.parked.append(self.waiting.popleft())
        return True

    def unpark(self) -> None:
        """Parked requests go back to the head of the queue, in the order they were admitted."""
        for entry in reversed(self.parked):
            self.waiting.appendleft(entry)
        self.parked.clear()

    def postprocess(self, batch: Batch) -> StepOutcome:
        first_tokens: list[RequestState] = []
        finished: list[RequestState] = []
        requests = self.manager.requests
        steady = commit_rules(self._radix, self._step)  # vLLM+'s, where each commit is one call
        for item in batch.items:
            run = self.running[item.plan.request_id]
            if item.is_prefill:
                if steady is None:
                    self.manager.complete_prefill(run.request_id, item.plan.end - item.plan.start)
                else:  # in one call (``marconi_vllm_steady.py``)
                    commit_steady(*steady, run.request_id, item.plan.end - item.plan.start)
                if item.plan.end == run.prompt_len:
                    first_tokens.append(run)
            else:
                self.manager.complete_decode(run.request_id)
                run.decoded += 1
            if run.decoded == run.output_len - 1 and requests[run.request_id].kv_len >= run.prompt_len:
                run.inserted_len = self.manager.finish(run.request_id).inserted_len
                del self.running[run.request_id]
                finished.append(run)
        return StepOutcome(first_tokens, finished)

    def plain_decode_run(self, iteration: int) -> tuple[list[RequestState], int]:
        """The decoding requests, oldest first, and how many coming steps are decodes only: a batch run where the
        pools have room (pages, SWA frees, checkpoints, no eviction: ``loop_runs.py``) beside no chunk such a step
        unstalls (``chunk_stays_stalled``); else plain steps (nothing but lengths), every prompt getting no chunk."""
        self._batch_run_at = None
        if not self.running or (self.waiting and len(self.running) < self.max_running):
            return [], 0
        spare = budget_left_by_decodes(self._radix, self.running, self.budget)  # None: asked after listing
        if spare is not None and self._radix is not None:  # a prompt's chunk next: no decode-only step
            if takes_chunk_next(self._radix, self._capped, self.running.values(), spare):
                return [], 0
        runs = oldest_first(self.running)
        decoding = [run for run in runs if not self._in_prefill(run)]
        if not decoding:
            return [], 0
        budget = self.budget - len(decoding)  # what the step's decodes leave the chunks
        if self._radix is not None and takes_chunk_next(self._radix, self._capped, runs, budget):
            return [], 0
        if self._radix is not None and self._chunks_stay_stalled(budget):
            allowed = self._last_output.allow(decoding)
            if allowed:
                self._batch_run_at = iteration
                return decoding, allowed
        num_steps = plain_steps(self.manager, decoding, iteration)
        for run in self.running.values():
            if num_steps and self._in_prefill(run):
                num_steps = self.manager.stalled_chunk_steps(run.request_id, budget, num_steps)
        return decoding, num_steps

    def advance_plain(self, runs: list[RequestState], num_steps: int) -> tuple[int, list[FullStep]] | None:
        """Take steps ``plain_decode_run`` allowed: a batch run (as many as it can, and the full steps among
        them), or plain steps: what complete_decode would record, and what each step's stalled chunks would,
        and no more."""
        if self._radix is not None and self._batch_run_at is not None:
            batch_run = self._last_output.take_run(runs, self._batch_run_at, num_steps, self.running)
            if batch_run[0]:  # its steps re-sized the stalled chunks to nothing, as the loop's would
                self._stall_prefills(self.budget - len(runs))
            return batch_run
        for run in runs:
            self.manager.take_plain_decodes(self.manager.requests[run.request_id], num_steps)
            run.decoded += num_steps
        self._stall_prefills(self.budget - len(runs))
        return None

    def _in_prefill(self, run: RequestState) -> bool:
        return self.manager.requests[run.request_id].kv_len < run.prompt_len

    def _chunks_stay_stalled(self, budget: int) -> bool:
        """Whether every running request still in its prompt gets no chunk under ``budget`` at each step of a
        batch run, whatever pages it starts and SWA it frees (``chunk_stays_stalled``); True with none."""
        assert self._radix is not None
        requests = self._radix.requests
        return all(
            self._capped.holds(run.request_id)
            or chunk_stays_stalled(self._radix, requests[run.request_id], budget)
            for run in self._capped.untold(self.running, requests)
        )

    def _stall_prefills(self, budget: int) -> None:
        """What each step of a run beside stalled chunks records of them (``_add_prefill``'s ``_stall``)."""
        for run in self._capped.untold(self.running, self.manager.requests):
            self._stall(run, budget)

    def _schedule_decodes(self, batch: Batch) -> int:
        budget, requests = self.budget, self.manager.requests
        for run in oldest_first(self.running):
            if run.request_id not in self.running or requests[run.request_id].kv_len < run.prompt_len:
                continue
            plan = self.manager.prepare_decode(run.request_id, batch.iteration)
            while isinstance(plan, Refusal):
                newer = [r for r in self.running.values() if r.admission_order > run.admission_order]
                self._retract(max(newer, key=admission_order_of) if newer else run, str(plan))
                if not newer:
                    break
                plan = self.manager.prepare_decode(run.request_id, batch.iteration)
            if not isinstance(plan, Refusal):
                self.manager.settle(run.request_id, 1)
                batch.items.append(BatchItem(plan, False))
                budget -= 1
        return budget

    def _add_prefill(self, batch: Batch, run: RequestState, budget: int) -> int:
        if self._capped.holds(run.request_id):
            self._stall(run, budget)  # what a chunk sized to nothing records (``CappedStalls``)
            self._capped.tell(run.request_id, budget)
            return budget
        chunk = self.manager.next_chunk_len(run.request_id, budget)
        if chunk <= 0:
            self._stall(run, budget)
            return budget
        plan = self.manager.prepare_prefill(run.request_id, chunk, batch.iteration)
        if isinstance(plan, Refusal):
            run.last_refusal = str(plan)
            return budget
        batch.items.append(BatchItem(plan, True, run.copy_state_from))
        run.copy_state_from = None
        return budget - chunk

    def _stall(self, run: RequestState, budget: int) -> None:
        """Its prefill chunk was sized to nothing: where the budget left tokens, the engine itself did it."""
        if budget > 0:
            run.last_refusal = (
                f"no prefill chunk fits at position {self.manager.requests[run.request_id].kv_len}"
            )

    def _admit_head(self) -> RequestState | None:
        state = self.waiting[0]
        assert state.tokens is not None, "a request is queued with its tokens"
        result = self.manager.admit(state.request_id, state.tokens, state.prompt_len)
        if isinstance(result, Refusal):
            state.last_refusal = str(result)
            return None
        self.waiting.popleft()
        state.copy_state_from, state.decoded = result.copy_state_from, 0
        state.match = result.match
        state.admission_order = next(self._counter)
        self.running[state.request_id] = state
        return state

    def _retract(self, victim: RequestState, why: str) -> None:
        # before the abort and its event: neither reads the held stalls, so the order changes nothing
        self._capped.forget(victim.request_id)
        given_up = retract(self.manager, self.running, victim, why)
        if given_up is None:
            self.waiting.appendleft(victim)
        else:
            self.given_up.append((victim, given_up))
