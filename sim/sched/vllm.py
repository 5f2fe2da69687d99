"""vLLM 0.33.0's scheduler (``v1/core/sched/scheduler.py: Scheduler.schedule``): one token budget a step, the
running requests first, then the waiting ones; preemption by recompute; async scheduling's lag.

Each step ``schedule`` walks the running requests in order (a decode is one token, a prefill the rest of its
prompt; ``long_prefill_token_threshold`` caps a prefill while others are eligible; the budget caps both;
align-mode Mamba cuts the chunk), each ``allocate_slots``: where the pool cannot back it the last running
request is preempted (its blocks freed, back to the head of the waiting queue, its tokens recomputed when it
returns), again until it fits or the request preempts itself, which ends the walk. Without a preemption in the
step, waiting requests are admitted in order while the budget lasts and fewer than ``max_num_seqs`` run:
each whole prompt must fit the free blocks (``full_sequence_must_fit``), the first that does not ends the step.

With async scheduling (on by default) the engine core schedules the next step before it processes the last
one's output (``EngineCore.step_with_batch_queue``): a request whose last token is in flight is not scheduled
again, and it leaves (its blocks freed) only when that step is processed, after the next is scheduled.
"""

from __future__ import annotations

from collections import deque

from sim.cache.events import Retracted
from sim.cache.interface import CacheModel
from sim.cache.results import Refusal
from sim.sched.batch import Batch, BatchItem, FullStep, StepOutcome
from sim.sched.plain_runs import plain_steps
from sim.sched.request import RequestState
from sim.sched.vllm_runs import batch_run_steps, take_batch_run


class VllmScheduler:
    def __init__(
        self,
        manager: CacheModel,
        max_batched: int,
        max_seqs: int,
        async_scheduling: bool,
        long_prefill_threshold: int = 0,
    ):
        self.manager = manager
        self.budget, self.max_seqs, self.async_scheduling = max_batched, max_seqs, async_scheduling
        self.long_prefill_threshold = long_prefill_threshold
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []  # in admission order; the last is preempted first
        self._by_id: dict[str, RequestState] = {}  # the running requests by id
        self.parked: list[RequestState] = []  # nothing is parked: preemption requeues at once
        self.given_up: list[tuple[RequestState, str]] = []
        self._known: dict[str, int] = {}  # a preempted request's tokens to recompute (prompt + outputs)
        self._launched: Batch | None = None  # async: the step scheduled, not yet processed
        self._done: list[RequestState] = []  # finished in that step: they leave when it is processed
        self._batch_at: int | None = None  # where the batch run ``plain_decode_run`` last allowed starts

    def add(self, state: RequestState) -> None:
        self.waiting.append(state)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self, iteration: int) -> Batch:
        batch = self._launch(iteration)
        if self._launched is not None:
            processed = self._process(self._launched)
            if processed and not batch:  # the engine core calls schedule again at once
                batch = self._launch(iteration)
        self._launched = batch if (self.async_scheduling and batch) else None
        return batch

    def postprocess(self, batch: Batch) -> StepOutcome:
        """``update_from_output``: the step's tokens advance each request; finished requests leave now, or
        (async) when the next step has been scheduled."""
        first_tokens: list[RequestState] = []
        for item in batch.items:
            run = self._running(item.plan.request_id)
            tokens = item.plan.end - item.plan.start
            if self._prompt_done(run):  # a decode: the prompt stays done (``_known`` only moves below)
                self.manager.complete_decode(run.request_id)
                run.decoded += 1
                prompt_done = True
            else:  # a prefill chunk, or a recompute of the outputs
                self.manager.complete_prefill(run.request_id, tokens)
                if item.plan.end == run.prompt_len:
                    first_tokens.append(run)
                if item.plan.end == self._known.get(run.request_id):  # a recompute: its outputs' KV again
                    run.decoded = self._known.pop(run.request_id) - run.prompt_len
                prompt_done = self._prompt_done(run)
            if prompt_done and run.decoded >= run.output_len - 1:
                self._done.append(run)
        finished = list(self._done)
        if not self.async_scheduling:
            self._process(batch)
        return StepOutcome(first_tokens, finished)

    def park_newest(self) -> bool:
        return False  # a step that schedules nothing waits for arrivals (vLLM would wait forever)

    def unpark(self) -> None:
        pass

    def plain_decode_run(self, iteration: int) -> tuple[list[RequestState], int]:
        """Decode-only steps with nothing waiting, nothing finishing, every request decoding: a batch run
        (block boundaries included) where ``batch_run_steps`` allows one, else plain steps."""
        self._batch_at = None
        if self.waiting or self._done or not self.running or len(self.running) > self.budget:
            return [], 0
        if not all(self._prompt_done(run) for run in self.running):
            return [], 0
        batch_steps = batch_run_steps(self.manager, self.running)
        self._batch_at = iteration if batch_steps else None
        return list(self.running), batch_steps or plain_steps(self.manager, self.running, iteration)

    def advance_plain(self, runs: list[RequestState], num_steps: int) -> tuple[int, list[FullStep]] | None:
        if self._batch_at is not None:  # a batch run: block boundaries included (``vllm_runs.py``)
            return take_batch_run(self.manager, runs, self._batch_at, num_steps)
        for run in runs:
            self.manager.take_plain_decodes(self.manager.requests[run.request_id], num_steps)
            run.decoded += num_steps
        return None

    # ---- internals ----------------------------------------------------------------------------------
    def _launch(self, iteration: int) -> Batch:
        batch = Batch(iteration)
        self.manager.begin_pass()
        budget = self.budget
        eligible = len(self.running) + len(self.waiting)
        budget, preempted = self._schedule_running(batch, budget, eligible)
        if not preempted:
            self._schedule_waiting(batch, budget, eligible)
        return batch

    def _schedule_running(self, batch: Batch, budget: int, eligible: int) -> tuple[int, bool]:
        done = {run.request_id for run in self._done}
        index, preempted = 0, False
        while index < len(self.running) and budget > 0:
            run = self.running[index]
            if run.request_id in done:  # async: its last token is in flight
                index += 1
                continue
            prompt_done = self._prompt_done(run)  # a preemption frees other requests: it stays as it is
            wanted = 1 if prompt_done else self._chunk_wanted(run, budget, eligible)
            if wanted <= 0:
                index += 1
                continue
            plan = self._prepare(run, wanted, batch.iteration, prompt_done)
            while isinstance(plan, Refusal):
                victim = self.running.pop()
                del self._by_id[victim.request_id]
                self._preempt(victim, str(plan))
                preempted = True
                if victim is run:
                    break
                plan = self._prepare(run, wanted, batch.iteration, prompt_done)
            if isinstance(plan, Refusal):
                break
            # a decode's one token lies past the prompt (kv_len >= known >= prompt_len): never a prefill
            batch.items.append(BatchItem(plan, not prompt_done and self._is_prefill(run, wanted)))
            budget -= wanted
            index += 1
        return budget, preempted

    def _schedule_waiting(self, batch: Batch, budget: int, eligible: int) -> None:
        while budget > 0 and self.waiting and len(self.running) < self.max_seqs:
            state = self.waiting[0]
            assert state.tokens is not None, "a request is queued with its tokens"
            known = self._known.get(state.request_id, state.prompt_len)
            threshold = self.long_prefill_threshold if eligible > 1 else 0
            first_budget = min(budget, threshold) if threshold > 0 else budget
            result = self.manager.admit(state.request_id, state.tokens, known, first_budget)
            if isinstance(result, Refusal):
                state.last_refusal = str(result)
                return
            if state.match is None:  # vLLM reports the first admission's hit
                state.match = result.match
            self.waiting.popleft()
            self.running.append(state)
            self._by_id[state.request_id] = state
            prompt_done = self._prompt_done(state)
            wanted = 1 if prompt_done else self._chunk_wanted(state, budget, eligible)
            plan = self._prepare(state, wanted, batch.iteration, prompt_done)
            if isinstance(plan, Refusal):  # the admission gate held the whole prompt: it cannot happen
                raise AssertionError(
                    f"{state.request_id}: admitted, then its first chunk was refused ({plan})"
                )
            batch.items.append(BatchItem(plan, self._is_prefill(state, wanted)))
            budget -= wanted

    def _chunk_wanted(self, run: RequestState, budget: int, eligible: int) -> int:
        """The tokens a step gives a request whose prompt (or recompute) is not done (a decode gets one)."""
        remaining = (
            self._known.get(run.request_id, run.prompt_len) - self.manager.requests[run.request_id].kv_len
        )
        threshold = self.long_prefill_threshold if eligible > 1 else 0
        if 0 < threshold < remaining:
            remaining = threshold
        return self.manager.next_chunk_len(run.request_id, min(remaining, budget))

    def _prepare(self, run: RequestState, tokens: int, iteration: int, prompt_done: bool):
        if prompt_done:
            return self.manager.prepare_decode(run.request_id, iteration)
        return self.manager.prepare_prefill(run.request_id, tokens, iteration)

    def _preempt(self, victim: RequestState, why: str) -> None:
        """``_preempt_request``: its blocks freed, back to the head of the waiting queue; it returns to
        recompute its prompt and the outputs it has (the last of them sampled, not yet computed)."""
        reached = self.manager.requests[victim.request_id].kv_len
        finishing = victim in self._done  # its last token in flight: delivered, it finishes while preempted
        if self._prompt_done(victim) and not finishing:
            self._known[victim.request_id] = victim.prompt_len + victim.decoded + 1
        self.manager.abort(victim.request_id)
        self.manager.events.publish(Retracted(victim.request_id, reached, why))
        victim.num_retractions += 1
        if not finishing:
            self.waiting.appendleft(victim)

    def _process(self, batch: Batch) -> bool:
        """``update_from_output`` of ``batch``: the blocks its tokens completed are hashed, its finished
        requests leave (their blocks freed). True if any left."""
        for item in batch.items:
            request_id = item.plan.request_id
            if request_id in self._by_id and self._by_id[request_id] not in self._done:
                self.manager.settle(request_id, 0)
        changed = bool(self._done)
        for run in self._done:
            if run.request_id not in self._by_id:  # preempted with its last token in flight: freed already
                continue
            self.running.remove(run)
            del self._by_id[run.request_id]
            run.inserted_len = self.manager.finish(run.request_id).inserted_len
        self._done = []
        return changed

    def _running(self, request_id: str) -> RequestState:
        return self._by_id[request_id]

    def _is_prefill(self, run: RequestState, tokens: int) -> bool:
        """A step of several tokens, or one below the prompt's end (a one-token recompute of an output past
        the prompt is a decode step to the batch)."""
        return tokens > 1 or self.manager.requests[run.request_id].kv_len < run.prompt_len

    def _prompt_done(self, run: RequestState) -> bool:
        req = self.manager.requests.get(run.request_id)
        if req is None:
            return False
        return req.kv_len >= self._known.get(run.request_id, run.prompt_len)
