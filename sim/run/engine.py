"""The SimPy engine: arrivals, closed-loop sessions, and one engine loop that advances time.

The loop sleeps on an event while idle; otherwise schedule -> backend.run(batch) -> ``timeout(step)``
-> postprocess. Monitoring is appending rows (``StepLog``) and stamping each request's record.
"""

from __future__ import annotations

import itertools

import simpy

from sim.cache.events import PlainStepsEnded, StepEnded, StepStarted, emit
from sim.cost.decode_run_settled import StepTimes
from sim.run.backend import Backend, run_for_log, step_floats_read
from sim.run.event_delays import event_delays
from sim.run.metrics import pool_values
from sim.run.step_log import StepLog, run_pool_columns
from sim.run.step_runs import batch_counts, clock_moved, priced
from sim.sched.interface import Scheduler
from sim.sched.request import RequestState, states_of
from sim.sched.run_steps import RunSteps, told_whole
from sim.trace import Trace


class Engine:
    def __init__(
        self,
        env: simpy.Environment,
        trace: Trace,
        scheduler: Scheduler,
        backend: Backend,
        fits=None,
        on_step=None,
        fast_path: bool | None = None,
        rate_scale: float = 1.0,
    ):
        """``rate_scale``: open-loop arrivals come this many times as fast (arrival times over it)."""
        self.env, self.trace, self.scheduler, self.backend = env, trace, scheduler, backend
        self.rate_scale = rate_scale
        self.manager = scheduler.manager
        self.events = self.manager.events  # the run's bus: the cache's, the scheduler's and this loop's
        # every request's record, in trace order, from before it arrives to its row
        self.states = states_of(trace)
        self.steps = StepLog()  # written here; the step events below are built only for other listeners
        self._step_started = self.events.channel(StepStarted)
        self._step_ended = self.events.channel(StepEnded)
        self._plain_ended = self.events.channel(PlainStepsEnded)
        self.num_done = 0  # requests finished or rejected
        self.fits = fits or (lambda request_id: None)  # returns why a request can never fit, or None
        self.on_step = on_step  # called after every step, where given (None: a run of steps skips the calls)
        # a backend that only predicts lets runs of plain decode steps skip the scheduler
        self.fast_path = backend.predicts_only if fast_path is None else fast_path
        self.iteration = 0
        self._wake: simpy.Event | None = None
        self._followers = trace.followers()

    def start(self) -> None:
        self.env.process(self._arrivals())
        self._looping = self._loop()
        self.env.process(self._looping)

    def close(self) -> None:
        """The run is over (``env.run()`` returned): end the loop, asleep on its wake-up event. Its frame holds
        this engine, and the event and the process waiting on it hold each other: a cycle that would keep every
        request's record for the cycle collector after the run (~10 ms at 1,000 requests) instead of freeing
        them by reference counting (as the caller's ``on_step``, closing over this engine, would)."""
        self._looping.close()
        self.on_step = None

    # ---- processes ----------------------------------------------------------------------------------
    def _arrivals(self):
        # requests arriving together are submitted together, before the engine forms its next batch
        for arrival, group in itertools.groupby(self.trace.open_loop(), key=lambda r: r.arrival):
            yield self.env.timeout(max(0.0, arrival / self.rate_scale - self.env.now))
            for request in group:
                self._submit(request.id)

    def _follow(self, request_id: str):
        yield self.env.timeout(self.trace.request(request_id).think_time)
        self._submit(request_id)

    def _loop(self):
        while True:
            if not self.scheduler.has_work():
                self._wake = self.env.event()
                yield self._wake
            batch = self.scheduler.schedule(self.iteration)
            self._drop_given_up()
            if not batch:
                self._unblock()
                continue
            started_at = self.env.now
            if self._step_started:
                emit(self._step_started, StepStarted(batch, self.manager))
            duration, counts = priced(self.backend, batch, self.manager)
            if not clock_moved(self.env, duration):  # else the step ends before anything else is due
                yield self.env.timeout(duration)
            outcome = self.scheduler.postprocess(batch)
            self.scheduler.unpark()
            self._record_step(batch, started_at, duration, counts)
            for state in outcome.first_tokens:
                if state.first_token_at is None:
                    state.first_token_at = self.env.now
            for state in outcome.finished:
                self._finish(state)
            self.iteration += 1
            if self.on_step is not None:
                self.on_step()
            # a run that ended requests may go on with processing them (the SGLang overlap loop's next run)
            while self.fast_path and (yield from self._plain_run()):
                pass

    def _plain_run(self):
        """Decode-only steps that change nothing but lengths (or, in a batch run, also start pages, take
        checkpoints and free SWA without evicting), ending before the next arrival or follow-up, taken in one
        event (rarely a few): the same steps, times and rows as the full loop. True where its last step ended
        requests (the scheduler may then take the next step, which processes them, in a run too)."""
        runs, num_steps = self.scheduler.plain_decode_run(self.iteration)
        if not num_steps:
            return False
        requests = self.manager.requests
        contexts = tuple(requests[r.request_id].kv_len for r in runs)
        # the steps that end before the next scheduled event, as one step after another would move the clock
        now, horizon = self.env.now, self.env.peek()
        if step_floats_read(self.events, self._step_ended, self._plain_ended):
            starts, taken = self.backend.decode_run(contexts, now, horizon, num_steps)
        else:
            starts, taken = run_for_log(self.backend, contexts, now, horizon, num_steps)
        if not len(taken):
            return False
        # the steps are taken before the clock moves over them: nothing else happens before they end
        pools = pool_values(self.manager.usage())
        run = self.scheduler.advance_plain(runs, len(taken))
        if run is not None:
            num_taken, full_steps = run
            starts, taken = starts[:num_taken], taken[:num_taken]
            if not len(taken):
                return False
        for delay in event_delays(self.env.now, taken, float(starts[-1])):
            yield self.env.timeout(delay)
        if run is None or not full_steps:
            self.steps.extend_decode_only(self.iteration, starts, taken, len(runs))
            if self._plain_ended:
                emit(self._plain_ended, PlainStepsEnded(self.iteration, starts, taken, len(runs)))
        else:
            self._record_batch_run(runs, starts, taken, full_steps, list(pools))
        ended = full_steps[-1].finished if run is not None and full_steps else ()
        for state in ended:  # the run's last step ended them, as a full step would
            self._finish(state)
        self.iteration += len(taken)
        if self.on_step is not None:
            for _ in taken:
                self.on_step()
        return bool(ended)

    def _record_batch_run(self, runs, starts: StepTimes, durations: StepTimes, full_steps, pools) -> None:
        """The rows of a batch run, from the pools before it, as column blocks (its pool columns as marks and
        moves: ``StepLog.extend_batch_run``); the bounds see each full step's batch, and other listeners the
        steps' events as the loop would send them (their rows' pools row by row: ``run_pool_columns``)."""
        first, num_decode = self.iteration, len(runs)
        kv_columns = (0, 3) if self.manager.has_swa else (0,)  # FULL free and SWA free; running follows
        self.steps.extend_batch_run(first, starts, durations, num_decode, pools, full_steps, kv_columns)
        if self._step_started or self._step_ended or self._plain_ended:
            columns = run_pool_columns(pools, full_steps, len(starts), kv_columns) if self._step_ended else []
            self._announce_batch_run(first, starts, durations, num_decode, full_steps, columns)

    def _announce_batch_run(
        self, first: int, starts, durations, num_decode: int, full_steps, columns
    ) -> None:
        """A batch run's step events: each full step's batch (a run of page-starting steps at once) and row, and
        the plain steps between them (where a batch reader alone listens, all in one: ``told_whole``)."""
        if self._step_started and told_whole(self.events):
            emit(self._step_started, StepStarted(RunSteps(full_steps), self.manager))
            return
        done = 0
        for full in full_steps:
            if full.offset > done and self._plain_ended:
                plain = starts[done : full.offset], durations[done : full.offset]
                emit(self._plain_ended, PlainStepsEnded(first + done, *plain, num_decode))
            if self._step_started and full.batch is not None:
                emit(self._step_started, StepStarted(full.batch, self.manager, full.num_steps))
            for offset in range(full.offset, full.offset + full.num_steps) if self._step_ended else ():
                step = (first + offset, starts[offset], durations[offset], 0, 0, num_decode)
                emit(self._step_ended, StepEnded(step, tuple(column[offset] for column in columns)))
            done = full.offset + full.num_steps
        if done < len(starts) and self._plain_ended:
            emit(
                self._plain_ended, PlainStepsEnded(first + done, starts[done:], durations[done:], num_decode)
            )

    # ---- events -------------------------------------------------------------------------------------
    def _submit(self, request_id: str) -> None:
        state = self.states[request_id]
        state.arrived_at = self.env.now
        why = self.fits(request_id)
        if why is not None:
            self._reject(state, why)
            return
        state.tokens = self.trace.request_seq(request_id)
        self.scheduler.add(state)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _finish(self, state: RequestState) -> None:
        state.finished_at = self.env.now
        self.num_done += 1
        for follower in self._followers.get(state.request_id, []):
            self.env.process(self._follow(follower))

    def _reject(self, state: RequestState, why: str) -> None:
        state.rejected = why
        self._finish(state)  # its session goes on: the follow-up is judged on its own

    def _drop_given_up(self) -> bool:
        """Reject the requests the scheduler gave up on; True if there were any."""
        dropped = bool(self.scheduler.given_up)
        while self.scheduler.given_up:
            self._reject(*self.scheduler.given_up.pop(0))
        return dropped

    def _unblock(self) -> None:
        """Nothing could be scheduled: park the newest running request (one fewer each time, so a request
        left alone that still cannot go on is given up on by the scheduler); with nothing running, let the
        parked ones try again, or give up on the waiting head, which an empty engine cannot hold."""
        if self.scheduler.park_newest():
            self._drop_given_up()
        elif self.scheduler.parked:
            self.scheduler.unpark()
        elif self.scheduler.waiting:
            state = self.scheduler.waiting.popleft()
            why = state.last_refusal
            self._reject(
                state, "the pools cannot hold it even with the cache emptied" + (f" ({why})" if why else "")
            )

    def _record_step(self, batch, started_at: float, duration: float, counts=None) -> None:
        num_prefill, prefill_tokens, num_decode = counts or batch_counts(batch)
        pools = pool_values(self.manager.usage())
        step = (self.iteration, started_at, duration, num_prefill, prefill_tokens, num_decode)
        self.steps.append(step, pools)
        if self._step_ended:
            emit(self._step_ended, StepEnded(step, pools))
