"""The SGLang loop's fast path (mixed into ``SGLangScheduler`` over ``SGLangDecode``): the engine's runs of
decode steps with nothing to admit in between, taken in one event (``sglang_runs``), else plain steps.

An overlap loop's run also takes the two full steps around a finish where their outcome is determined: the
step that gives a request its last output (the run's last: ``take_finishing_run``), and the next one, which
processes it (the next run's first: the others' decode step, with the finish, ``_process``, between its
plans and its completion, as ``update_running_batch`` and ``process_batch_result`` order them). Either is
left to the loop where it might evict, or where anything waits, is chunked or just prefilled.
"""

from __future__ import annotations

from sim.cache.components import Component
from sim.sched.batch import Batch, FullStep
from sim.sched.plain_runs import plain_steps
from sim.sched.request import RequestState
from sim.sched.sglang_decode import SGLangDecode
from sim.sched.sglang_event_plans import StepNeeds
from sim.sched.sglang_runs import step_fits_and_needs, take_batch_run, take_finishing_run


class SGLangFastPath(SGLangDecode):
    overlap: bool
    _batch_run_at: int | None  # the iteration a batch run starts at (None: plain steps)
    _finishing_steps: int  # a batch run of this many steps ends requests at its last (0: none does)

    def plain_decode_run(self, iteration: int) -> tuple[list[RequestState], int]:
        """Decode-only steps with nothing to process or admit in between: a batch run (steps that may start
        pages, taken without evicting: ``batch_decode_steps``), else plain steps. An overlap loop's batch run
        may start with processing the requests the step before ended (``_done``)."""
        if self.waiting or self.chunked or self._last_extend or not self.running:
            return [], 0
        if self._done and not self.overlap:
            return [], 0
        launched = self._launched
        if launched is not None and any(item.is_prefill for item in launched.items):
            return [], 0
        runs = [s for s in self.running if s not in self._done] if self._done else list(self.running)
        pools, need = self.manager.pools, len(runs)  # every decode step evicts for a page each
        if (
            not runs
            or pools[Component.FULL].num_free < need
            or (self.manager.has_swa and pools[Component.SWA].num_free < need)
        ):
            return [], 0
        # each stops a step short of its last output (the step that ends it is processed in full), but an
        # overlap loop's batch run takes that step too (``take_finishing_run``): only its processing is full
        fewest = min(state.output_len - state.decoded - 2 for state in runs)
        if self.overlap and fewest >= 0:
            reqs = [self.manager.requests[state.request_id] for state in runs]
            if self.manager.batch_run_room(reqs) >= 0:
                self._batch_run_at, self._finishing_steps = iteration, fewest + 1
                return runs, fewest + 1
        if fewest <= 0 or self._done:  # (a request the step just finished may be listed: without overlap)
            return [], 0
        reqs = [self.manager.requests[state.request_id] for state in runs]
        if fewest > 0 and self.manager.batch_run_room(reqs) >= 0:
            self._batch_run_at, self._finishing_steps = iteration, 0
            return runs, fewest
        self._batch_run_at = None
        return runs, plain_steps(self.manager, runs, iteration)

    def advance_plain(self, runs: list[RequestState], num_steps: int) -> tuple[int, list[FullStep]] | None:
        """Take the steps ``plain_decode_run`` allowed: a batch run (as many as it can, and the full steps among
        them), else plain steps."""
        if self._batch_run_at is None:
            for state in runs:
                self.manager.take_plain_decodes(self.manager.requests[state.request_id], num_steps)
                state.decoded += num_steps
            return None
        ended, at = self._done, self._batch_run_at
        fits, needs = self._leave_running(runs, at) if ended else (True, None)
        if not fits:
            return 0, []
        process = self._process_ended if ended else None
        if num_steps != self._finishing_steps:
            return take_batch_run(self, at, num_steps, process, ended, needs)
        done, full_steps, ending = take_finishing_run(self, at, num_steps, process, ended, needs)
        if ending:  # what the full step's postprocess leaves: finished by length, processed next step
            self._done = ending
            if self.manager.has_swa:  # its prefill pass: hybrid SWA retries admission every pass
                self.batch_is_full = False
        return done, full_steps

    def _leave_running(self, runs: list[RequestState], iteration: int) -> tuple[bool, StepNeeds | None]:
        """``update_running_batch``'s first move, where the step after (at ``iteration``) evicts nothing: the
        requests the step in flight ends leave the running batch (False: the step is left to the loop, nothing
        moved). That step's needs, where read in the same pass (``step_fits_and_needs``), for the run to take."""
        reqs = [self.manager.requests[state.request_id] for state in runs]
        fits, needs = step_fits_and_needs(self, reqs, iteration)
        if fits:
            self.running = runs
            self.batch_is_full = False
        return fits, needs

    def _process_ended(self) -> None:
        """``process_batch_result`` of the step that ended them (in flight: the running requests and them),
        after the next step's plans; that next step is in flight after it."""
        launched = self._launched
        assert launched is not None, "an overlap loop's step ended them"
        self._process(launched)
        running = {state.request_id for state in self.running}
        items = [item for item in launched.items if item.plan.request_id in running]
        self._launched = Batch(launched.iteration, items)
