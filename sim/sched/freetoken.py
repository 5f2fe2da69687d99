"""FreeToken 0.2.1's scheduler (``freetoken/scheduler/``): prefill first, a batch is all prefill or all decode.

Each step ``Scheduler._schedule_next_batch`` asks ``PrefillManager.schedule_next_batch`` for a prefill batch and
only without one ``DecodeManager.schedule_next_batch`` (every decoding request, in arrival order). The prefill
pass (``PrefillAdder``) walks the pending list in order: a continuation of a chunked prompt first, then new
requests while a table slot is free (``max_running_req``, 4 by default) and the cache's admission accepts them
(``_try_allocate_one``: their KV reservation on top of the running decode's, their GDN slots, a window of
SWA); the first refusal ends the pass. Chunks share the pass's token budget (``max_extend_tokens``). No
request is ever retracted.

With the overlap loop (``Scheduler.overlap_loop``, the default) the step just run is processed after the next
one is launched: its prompts are committed to the cache and its finished requests released then
(``_process_last_data``). A step that launches nothing still processes the last one, and the loop at once tries
again; ``schedule`` does both in one call.
"""

from __future__ import annotations

import itertools
from collections import deque

from sim.cache.interface import CacheModel
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.sched.batch import Batch, BatchItem, FullStep, StepOutcome
from sim.sched.loop_runs import batch_run_allowed, take_loop_run
from sim.sched.plain_runs import plain_steps
from sim.sched.request import RequestState


class FreeTokenScheduler:
    def __init__(self, manager: CacheModel, prefill_budget: int, max_running: int, overlap: bool):
        self.manager = manager
        self.budget, self.max_running, self.overlap = prefill_budget, max_running, overlap
        self.waiting: deque[RequestState] = deque()  # the pending list: chunked continuations first
        self.running: dict[str, RequestState] = {}  # holding a table slot: admitted, not yet released
        self.parked: list[RequestState] = []  # FreeToken never retracts: always empty
        self.given_up: list[tuple[RequestState, str]] = []
        self._uid = itertools.count()
        self._launched: Batch | None = None  # overlap: the step run but not yet processed
        self._done: list[RequestState] = []  # finished in that step, released when it is processed
        # the radix manager's batch decode runs (timed mode): where the fast path last chose one, its start
        self._radix = manager if isinstance(manager, CacheManager) else None
        self._batch_run_at: int | None = None

    def add(self, state: RequestState) -> None:
        state.admission_order = next(self._uid)  # FreeToken's uid: decode batches run in its order
        self.waiting.append(state)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self._launched)

    def schedule(self, iteration: int) -> Batch:
        batch = self._launch(iteration)
        if self._launched is not None:
            processed = self._process(self._launched, batch)
            if processed and not batch:  # the loop goes round again at once, with the step processed
                batch = self._launch(iteration)
        self._launched = batch if (self.overlap and batch) else None
        return batch

    def postprocess(self, batch: Batch) -> StepOutcome:
        """The step's forward: every request advances (``Req.complete_one``). With overlap the step is processed
        once the next one has been launched. Without it (``normal_loop``) it is processed at once, in the
        step's order: a request done at its prompt is released before a later request of the step commits its
        prompt (the plain loop's commit is ``complete_prefill``'s), as ``_process_last_data`` walks the batch."""
        first_tokens: list[RequestState] = []
        finished: list[RequestState] = []
        for item in batch.items:
            run = self.running[item.plan.request_id]
            if item.is_prefill:
                self.manager.complete_prefill(run.request_id, item.plan.end - item.plan.start)
                if item.plan.end == run.prompt_len:
                    first_tokens.append(run)
            else:
                self.manager.complete_decode(run.request_id)
                run.decoded += 1
            if self._prompt_done(run) and run.decoded == run.output_len - 1:
                self._done.append(run)
                finished.append(run)
                if not self.overlap:
                    self._process(Batch(batch.iteration, [item]), None)
        return StepOutcome(first_tokens, list(self._done) if self.overlap else finished)

    def park_newest(self) -> bool:
        return False  # nothing is ever retracted: a stalled head waits (the engine gives up on it)

    def unpark(self) -> None:
        pass

    def plain_decode_run(self, iteration: int) -> tuple[list[RequestState], int]:
        """Decode-only steps with nothing to process in between: nothing finishing or committing in the step
        in flight, and nothing pending or no table row free (every prompt done: no continuation is pending, so
        each step's prefill pass would begin and add nothing). A batch run where the pools have room (steps
        that start pages and free SWA without evicting: ``sim/sched/loop_runs.py``), else plain steps."""
        self._batch_run_at = None
        if self._done or not self.running or not self._all_plain_launched():
            return [], 0
        runs = sorted(self.running.values(), key=_uid)
        if not all(self._prompt_done(run) for run in runs):
            return [], 0
        if self.waiting and len(self.running) < self.max_running:
            return [], 0
        if self._radix is not None:
            allowed = batch_run_allowed(self._radix, runs)
            if allowed:
                self._batch_run_at = iteration
                return runs, allowed
        return runs, plain_steps(self.manager, runs, iteration)

    def advance_plain(self, runs: list[RequestState], num_steps: int) -> tuple[int, list[FullStep]] | None:
        """Take the steps ``plain_decode_run`` allowed: a batch run (as many as it can, and the full steps among
        them), else plain steps."""
        if self._radix is not None and self._batch_run_at is not None:
            begins_pass = bool(self.waiting)  # the prefill pass that adds nothing
            return take_loop_run(self._radix, runs, self._batch_run_at, num_steps, begins_pass, settles=False)
        for run in runs:
            self.manager.take_plain_decodes(self.manager.requests[run.request_id], num_steps)
            run.decoded += num_steps
        return None

    # ---- internals ----------------------------------------------------------------------------------
    def _launch(self, iteration: int) -> Batch:
        batch = Batch(iteration)
        if self.waiting:
            self._prefill(batch)
        if not batch.items:
            self._decode(batch)
        return batch

    def _prefill(self, batch: Batch) -> None:
        """``PrefillManager.schedule_next_batch``: the adder's pass over the pending list, then the chunks'
        pages (``_prepare_batch``: the extend-free and ``allocate_paged``)."""
        self.manager.begin_pass()
        budget, added = self.budget, []
        for state in self.waiting:
            chunk = self._add(state, budget)
            if chunk <= 0:
                break
            added.append((state, chunk))
            budget -= chunk
            if budget <= 0:
                break
        chunked = [
            s for s, chunk in added if self.manager.requests[s.request_id].kv_len + chunk < s.prompt_len
        ]
        for _ in added:
            self.waiting.popleft()
        self.waiting.extendleft(reversed(chunked))
        for state, chunk in added:
            plan = self.manager.prepare_prefill(state.request_id, chunk, batch.iteration)
            if isinstance(plan, Refusal):
                self._give_up(state, f"FreeToken's allocate_paged cannot back the chunk ({plan})")
                continue
            batch.items.append(BatchItem(plan, True, state.copy_state_from))
            state.copy_state_from = None

    def _add(self, state: RequestState, budget: int) -> int:
        """``PrefillAdder.try_add_one``: the chunk the pass gives the request (0: the pass ends here)."""
        manager = self.manager
        if state.request_id in self.running:  # a chunked continuation keeps what it holds
            return manager.next_chunk_len(state.request_id, budget)
        if len(self.running) >= self.max_running:
            return 0
        assert state.tokens is not None, "a request is queued with its tokens"
        result = manager.admit(state.request_id, state.tokens, state.prompt_len)
        if isinstance(result, Refusal):
            state.last_refusal = str(result)
            return 0
        chunk = manager.next_chunk_len(state.request_id, budget)
        if chunk <= 0:  # no aligned chunk this pass: the admission is undone
            manager.abort(state.request_id)
            state.last_refusal = f"no prefill chunk fits at position {result.match.cached_len}"
            return 0
        state.copy_state_from, state.decoded, state.match = result.copy_state_from, 0, result.match
        self.running[state.request_id] = state
        return chunk

    def _decode(self, batch: Batch) -> None:
        """``DecodeManager.schedule_next_batch``: every request still decoding, in uid order."""
        for run in sorted(self.running.values(), key=_uid):
            if not self._prompt_done(run) or run.decoded >= run.output_len - 1:
                continue
            plan = self.manager.prepare_decode(run.request_id, batch.iteration)
            if isinstance(plan, Refusal):
                self._give_up(run, f"FreeToken's decode cannot get a page ({plan})")
                continue
            batch.items.append(BatchItem(plan, False))

    def _process(self, batch: Batch, launched: Batch | None) -> bool:
        """``_process_last_data``: in the step's order, a finished request is released
        (``cache_req(finished=True)``), a prompt ended by the step is committed (``finished=False``). True if
        anything was."""
        computing = {item.plan.request_id for item in launched.items} if launched is not None else set()
        done = {run.request_id for run in self._done}
        changed = False
        for item in batch.items:
            request_id = item.plan.request_id
            if request_id in done:
                run = self.running.pop(request_id)
                run.inserted_len = self.manager.finish(request_id).inserted_len
                changed = True
            elif item.is_prefill and request_id in self.running:
                self.manager.settle(request_id, int(request_id in computing))
                changed = True
        self._done = [run for run in self._done if run.request_id in self.running]
        return changed

    def _prompt_done(self, run: RequestState) -> bool:
        return self.manager.requests[run.request_id].kv_len >= run.prompt_len

    def _all_plain_launched(self) -> bool:
        launched = self._launched
        return launched is None or not any(item.is_prefill for item in launched.items)

    def _give_up(self, state: RequestState, why: str) -> None:
        self.manager.abort(state.request_id)
        self.running.pop(state.request_id, None)
        if state in self.waiting:
            self.waiting.remove(state)
        self.given_up.append((state, why))


def _uid(state: RequestState) -> int:
    return state.admission_order
