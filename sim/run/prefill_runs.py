"""The default loop's runs of full steps (``DefaultScheduler``: prompt chunks beside decodes), taken in one event:
each step scheduled, priced, processed and written as the loop's own, but the clock jumped over them all at once
(``event_delays``), as the decode runs do (``Engine._plain_run``, which enters a run where it finds no decode run
to take: the loop's own full step is untouched, and no other scheduler pays for the run).

Where nothing listens to the step events, every such step is the loop's: ``schedule``, ``postprocess`` and the row
read no clock, so only what the loop does with the clock between steps bounds a run. It stops at the step that
starts at or after the next SimPy event (``env.peek()``: an arrival or follow-up the next ``schedule`` must see; no
event is made inside a run), before a step that gives up on a request or schedules nothing (the loop rejects or
parks at its start: ``_step_after_run`` takes it after the jump), after a step that ends requests (their
followers start at its end), leaves a request waiting or parked, or after which the loop's fast path would take
a plain or batch decode run (``plain_decode_run``). Its first tokens are stamped with the step's end, the clock's
reading there (``started_at + duration``, the sum the clock makes)."""

from __future__ import annotations

from sim.run.event_delays import event_delays
from sim.sched.default import DefaultScheduler
from sim.sched.request import RequestState

# False: the default loop takes every full step in its own event (the reference; tests/test_prefill_runs.py holds
# both equal). Read when an engine is made.
PREFILL_RUNS = True


def runs_reach(scheduler) -> bool:
    """Whether an engine on ``scheduler`` takes prefill runs: the switch on and the default loop's scheduler."""
    return PREFILL_RUNS and isinstance(scheduler, DefaultScheduler)


def complete_step(engine, batch, started_at: float, duration: float) -> list[RequestState]:
    """What the loop does after a scheduled step's time has passed, but finish requests (the caller does, at the
    step's end): processed, written, first tokens stamped with its end, the iteration counted. Returns the
    requests the step ended. (``Engine._loop`` keeps its own inline copy: its step is the reference and the
    other schedulers' path, which a call would slow.)"""
    scheduler = engine.scheduler
    outcome = scheduler.postprocess(batch)
    scheduler.unpark()
    engine._record_step(batch, started_at, duration)
    ended_at = started_at + duration
    for state in outcome.first_tokens:
        if state.first_token_at is None:
            state.first_token_at = ended_at
    engine.iteration += 1
    return outcome.finished


def take_prefill_run(engine):
    """A run of the loop's full steps from now (a generator, as ``Engine._plain_run``): True where it took any
    and its last one was a step (the loop's fast path goes on), False where it took none or ended on a batch
    with nothing scheduled (the loop goes back to its top)."""
    if not _runs(engine):
        return False
    env, scheduler = engine.env, engine.scheduler
    horizon, start = env.peek(), env.now
    starts: list[float] = []
    durations: list[float] = []
    ended: list[RequestState] = []
    pending = None
    while start < horizon and scheduler.has_work():
        batch = scheduler.schedule(engine.iteration)
        if scheduler.given_up or not batch:
            pending = batch
            break
        duration = engine.backend.run(batch, engine.manager)
        ended = complete_step(engine, batch, start, duration)
        starts.append(start)
        durations.append(duration)
        start = start + duration
        if ended or _run_ends(engine):
            break
    if durations:
        yield from _jump(engine, starts, durations, ended)
    if pending is not None:
        return (yield from _step_after_run(engine, pending))
    return bool(durations)


def _jump(engine, starts: list[float], durations: list[float], ended: list[RequestState]):
    """The clock moved over the run's steps, then what the loop does at their ends with it: the last step's
    ended requests finished, each step counted to ``on_step``."""
    env = engine.env
    for delay in event_delays(env.now, durations, starts[-1]):
        yield env.timeout(delay)
    for state in ended:
        engine._finish(state)
    if engine.on_step is not None:
        for _ in durations:
            engine.on_step()


def _step_after_run(engine, batch):
    """The step a run stopped before, at its start (now), as the loop takes it: the requests given up on
    rejected, nothing scheduled unblocked (False: the loop goes back to its top), else the step in its own event
    (True). No listener reads its step events (``_runs``)."""
    engine._drop_given_up()
    if not batch:
        engine._unblock()
        return False
    started_at = engine.env.now
    duration = engine.backend.run(batch, engine.manager)
    yield engine.env.timeout(duration)
    for state in complete_step(engine, batch, started_at, duration):
        engine._finish(state)
    if engine.on_step is not None:
        engine.on_step()
    return True


def _runs(engine) -> bool:
    """Whether a run may start: requests running and none waiting, parked or given up on, and no listener to any
    step event (each step would be announced at its own time)."""
    scheduler = engine.scheduler
    if engine._step_started or engine._step_ended or engine._plain_ended:
        return False
    return bool(scheduler.running) and not (scheduler.waiting or scheduler.parked or scheduler.given_up)


def _run_ends(engine) -> bool:
    """After a step: whether the loop would next do more than schedule (a request waiting or parked, or its fast
    path's decode run: ``plain_decode_run`` counts steps)."""
    scheduler = engine.scheduler
    if scheduler.waiting or scheduler.parked:
        return True
    return scheduler.plain_decode_run(engine.iteration)[1] > 0
