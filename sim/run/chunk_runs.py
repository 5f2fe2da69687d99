"""A run of SGLang's lone chunks taken in one event: the engine loop's steps, each a long prompt's next chunk
alone (``sim/sched/sglang_chunk_runs.py``), scheduled, priced, processed and recorded one after another while
each starts before the next scheduled event (an arrival or a follow-up), the clock moved over them at the end.

Nothing outside the loop reads the run's state before that event, and the loop reads the clock only where a
request is stamped: a first token is stamped with its step's end (the float the step-by-step timeouts land
on), and where a step ends a request or gives one up on, or where a pass launches nothing, the clock is moved
there first and the loop's own handling follows (a follow-up's process it starts is then the next event). The step that ends at or past the next event is taken last,
processed after the clock (and that event) has passed, as the loop would.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Protocol

import simpy

from sim.cache.engines.sglang_budget import PassBudget
from sim.cache.events import StepStarted, emit
from sim.cache.interface import CacheModel
from sim.run.backend import Backend
from sim.run.event_delays import event_delays
from sim.sched.batch import Batch
from sim.sched.interface import Scheduler
from sim.sched.request import RequestState
from sim.sched.sglang_chunk_runs import lone_chunk_next, lone_chunks_of, schedule_lone_chunk


class LoopEngine(Protocol):
    """What a chunk run reads and calls of the engine loop (``sim/run/engine.py``'s ``Engine``)."""

    env: simpy.Environment
    scheduler: Scheduler
    backend: Backend
    manager: CacheModel
    iteration: int
    on_step: Callable[[], None] | None
    _step_started: list[Callable[[Any], None]]

    def _record_step(self, batch: Batch, started_at: float, duration: float) -> None: ...
    def _finish(self, state: RequestState) -> None: ...
    def _drop_given_up(self) -> bool: ...
    def _unblock(self) -> None: ...


def chunk_run(engine: LoopEngine) -> Generator[simpy.Event, Any, bool]:
    """The lone chunks from now on, in one event; True where it took a step (the loop then tries a plain
    run, as after any step), False where it took none or a pass launched nothing (handled as the loop does)."""
    sched = lone_chunks_of(engine.scheduler)
    if sched is None or not lone_chunk_next(sched):
        return False
    env, manager = engine.env, engine.manager
    horizon, start = env.peek(), env.now
    durations: list[float] = []  # the steps the clock has not moved over yet
    kept: PassBudget | None = None  # the run's lone passes' reservations
    end, taken = start, False
    last: tuple[Batch, float, float] | None = None
    while end < horizon and lone_chunk_next(sched):
        num_given_up = len(sched.given_up)
        batch, kept = schedule_lone_chunk(sched, engine.iteration, kept)
        if len(sched.given_up) > num_given_up or not batch:  # the loop's own handling, at the pass's time
            yield from _move_clock(env, start, durations)
            start, durations = end, []
            engine._drop_given_up()  # a request given up on starts its follow-up's process: the next event
            horizon = env.peek()
            if not batch:
                engine._unblock()
                return False
        if engine._step_started:
            emit(engine._step_started, StepStarted(batch, manager))
        duration = engine.backend.run(batch, manager)
        durations.append(duration)
        started_at, end = end, end + duration
        if not end < horizon:  # processed once the clock has passed the next event
            last = (batch, started_at, duration)
            break
        if (yield from _complete(engine, batch, started_at, duration, (env, start, durations))):
            start, durations, horizon = end, [], env.peek()  # a finish starts its follow-ups' processes
        taken = True
    yield from _move_clock(env, start, durations)
    if last is not None:
        yield from _complete(engine, *last, None)
        taken = True
    return taken


def _complete(
    engine: LoopEngine,
    batch: Batch,
    started_at: float,
    duration: float,
    pending: tuple[simpy.Environment, float, list[float]] | None,
) -> Generator[simpy.Event, Any, bool]:
    """The loop's step after its timeout: processed, recorded, its first tokens and finishes stamped (a finish
    reads the clock: ``pending``'s steps are moved over first, and True says so; None: the clock is there)."""
    outcome = engine.scheduler.postprocess(batch)
    engine.scheduler.unpark()
    engine._record_step(batch, started_at, duration)
    end = started_at + duration
    for state in outcome.first_tokens:
        if state.first_token_at is None:
            state.first_token_at = end
    moved = False
    if outcome.finished and pending is not None:
        yield from _move_clock(*pending)
        moved = True
    for state in outcome.finished:
        engine._finish(state)
    engine.iteration += 1
    if engine.on_step is not None:
        engine.on_step()
    return moved


def _move_clock(
    env: simpy.Environment, start: float, durations: list[float]
) -> Generator[simpy.Event, Any, None]:
    """The timeouts that land the clock, from ``start`` (now), where step after step of ``durations`` would."""
    if durations:
        for delay in event_delays(start, durations):
            yield env.timeout(delay)
