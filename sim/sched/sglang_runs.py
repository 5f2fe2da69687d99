"""The SGLang loop's batch decode runs (timed mode): the running batch's decode steps taken in one event, with
nothing to admit, process or finish in between, exactly as the loop's full steps would take them.

A run is stretches of steps that take no checkpoint and free no SWA (``batch_decode_steps``: only the pages they
start are allocated, in one go) between *event* steps, where some request takes a checkpoint or fires its SWA
free: those run the full step's own decode half (``_check_decode_mem``, ``_decode_items``, ``complete_decode``).
Every step keeps each KV pool room for a page per request and the engine's slack after it, and an event step's
new checkpoint states are free, so no step evicts, refuses or retracts: the run stops before one that might.
A step that started a page or was an event step was a full step of the loop: the engine writes its row from the
pools after it, and the bounds see its batch (``FullStep``).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.nocache import NoCacheRules
from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.sched import sglang_event_plans as plans
from sim.sched import sglang_free_stretch as free_stretch
from sim.sched.batch import (
    Batch,
    FullStep,
    page_step_batch,
    step_fits_room,
    take_quiet_stretch,
)
from sim.sched.request import RequestState
from sim.sched.sglang_carried import carried_silence
from sim.sched.sglang_clock import TokenClock
from sim.sched.sglang_event_plans import StepNeeds
from sim.sched.sglang_folds import idle_event_steps, take_idle_event_steps

# an event step's requests that only start a page get the page alone (off: through ``prepare_decode``, the
# reference), under the rules whose refusal, reservation and eviction ahead are proved to do nothing there
PAGE_ONLY_AT_ONCE = True
PAGE_ONLY_RULES = (SGLangRules, MarconiRules)
# a run's pass begun with the steps in flight alone (``DECODE_PASS``) under the null rules too: their pass's budget,
# ``req_states`` and charged requests are read only by admissions and chunks, after the next full step's own pass
# (off: the whole pass, the reference; tests/test_nocache_lean_pass_property.py)
NULL_DECODE_PASS = True


class RunningBatch(Protocol):
    """What a batch run reads and moves of the SGLang scheduler (``SGLangDecode``)."""

    manager: CacheManager
    rules: Any  # SGLangRules
    running: list[RequestState]
    batch_is_full: bool
    clock: TokenClock


def take_batch_run(
    sched: RunningBatch,
    iteration: int,
    max_steps: int,
    process: Callable[[], None] | None = None,
    ended: list[RequestState] | None = None,
    needs: StepNeeds | None = None,
) -> tuple[int, list[FullStep]]:
    """Up to ``max_steps`` decode steps of the running batch from ``iteration`` on; returns how many were taken
    (fewer where a step might evict) and the full steps among them. ``process``: the first step is an event
    step that processes the step in flight before it (which ``ended`` those requests) between its plans and
    its completion, and ``needs`` that step's, read already (``step_fits_and_needs``: its fit checked)."""
    manager = sched.manager
    reqs = [manager.requests[state.request_id] for state in sched.running]
    # each full step's steps in flight are the step before's batch: the running requests (and those it ended)
    ids = [req.request_id for req in reqs] + [state.request_id for state in ended or ()]
    in_flight: frozenset[str] | None = frozenset(ids)
    done = 0
    full_steps: list[FullStep] = []
    announced = manager.events.reads_batches()  # the bounds read each full step's batch
    folds, phase = type(sched.rules) is SGLangRules, manager.policy.iteration_phase
    frees = free_stretch.stretch_takes_frees(manager)
    carried = carried_silence(manager, sched.rules, reqs, plans.ONE_PASS and _page_only(sched))
    while done < max_steps:
        if in_flight is None and frees:  # the run's pass is begun: the null rules' frees go inside a stretch
            stretch, stretch_steps = free_stretch.take_freeing_stretch(
                sched, reqs, iteration, done, max_steps, announced
            )
            if stretch:
                full_steps += stretch_steps
                done += stretch
                continue
        if process is None:
            if carried is None:
                stretch, stretch_steps = take_quiet_stretch(
                    manager, reqs, iteration, done, max_steps, announced
                )
            else:
                stretch, stretch_steps = carried.quiet_stretch(manager, iteration, done, max_steps, announced)
            if stretch:
                full_steps += stretch_steps
                done += stretch
                continue
        if in_flight is None and folds:  # the run's pass is begun: idle event steps may go at once
            if carried is None:
                idle = idle_event_steps(
                    manager, sched.rules, reqs, iteration + done + phase, max_steps - done
                )
            else:
                idle = carried.idle_steps(manager, iteration + done, max_steps - done)
            if idle:
                full_steps += take_idle_event_steps(manager, reqs, iteration, done, idle, announced)
                done += idle
                continue
        if needs is None:
            if carried is None:
                fits, needs = step_fits_and_needs(sched, reqs, iteration + done)
            else:
                fits, needs = carried.fits_and_needs(manager, iteration + done)
            if not fits:
                break
        batch = _event_step(sched, reqs, iteration + done, in_flight, announced, process, needs)
        if carried is not None:
            carried.stepped(needs, process is not None, iteration + done + 1)
        # one pass begun per run: nothing reads its accounts before the next full step's
        in_flight = process = None
        full_steps.append(FullStep(done, 0, batch, manager.usage()))
        needs = None
        done += 1
    for state in sched.running:
        state.decoded += done
    sched.clock.decode_steps_launched(len(full_steps))
    return done, full_steps


def take_finishing_run(
    sched: RunningBatch,
    iteration: int,
    num_steps: int,
    process: Callable[[], None] | None = None,
    ended: list[RequestState] | None = None,
    needs: StepNeeds | None = None,
) -> tuple[int, list[FullStep], list[RequestState]]:
    """An overlap loop's batch run whose last step gives requests their last output (ends them), taken as any
    run; that step is handed on as the loop's full step it was, with the requests it ended. Returns the steps
    taken, the full steps, and the ended requests in batch order (none where the run stopped short). The rest
    of what the full step did leaves nothing a later step reads: its pass is begun again by the next full step,
    its batch in flight names the running requests as the one in flight before it does, and its prefill pass
    stops at once (nothing waits, nothing is chunked). ``process``, ``ended``, ``needs``: as ``take_batch_run``'s."""
    done, full_steps = take_batch_run(sched, iteration, num_steps, process, ended, needs)
    if done < num_steps:
        return done, full_steps, []
    ended = [state for state in sched.running if state.decoded >= state.output_len - 1]
    last = full_steps[-1] if full_steps else None
    if last is None or last.offset + last.num_steps < num_steps:  # it only moved lengths
        batch = _last_step_batch(sched, iteration + num_steps - 1)
        full_steps.append(FullStep(num_steps - 1, 0, batch, None, finished=tuple(ended)))
    else:
        full_steps[-1] = last._replace(finished=tuple(ended))
    if last is None or last.offset != num_steps - 1:  # the loop launched it as a step of its own
        sched.clock.decode_steps_launched(1)
    return done, full_steps, ended


def _last_step_batch(sched: RunningBatch, iteration: int) -> Batch | None:
    """The batch of a run's last step (taken: each request's length is a token past it), as the loop launched
    it: each running request's next token. Made only where someone reads the steps' batches (``StepStarted``):
    an observer is told of every step, a batch or among plain decodes."""
    manager = sched.manager
    if not manager.events.reads_batches():
        return None
    reqs = [manager.requests[state.request_id] for state in sched.running]
    return page_step_batch(reqs, [req.kv_len - 1 for req in reqs], iteration, 0)


def event_step_fits(sched: RunningBatch, reqs: list[RequestCache]) -> bool:
    """Whether the next step, taken in full, evicts nothing (``step_fits_room``), with SGLang's room: the KV
    pools' less the rules' slack and a page per request."""
    manager = sched.manager
    room = manager.topology.kv_room(manager.has_swa) - sched.rules.alloc_slack_pages - len(reqs)
    return step_fits_room(manager, reqs, room)


def _proved(sched: RunningBatch) -> bool:
    """The rules are those an event step's page-only and decode-pass shortcuts are proved for (a subclass is not)."""
    return type(sched.rules) in PAGE_ONLY_RULES


def _decode_pass_proved(sched: RunningBatch) -> bool:
    """The rules a run's pass may be begun for with its steps in flight alone (``DECODE_PASS``)."""
    return _proved(sched) or (NULL_DECODE_PASS and type(sched.rules) is NoCacheRules)


def _page_only(sched: RunningBatch) -> bool:
    return PAGE_ONLY_AT_ONCE and _proved(sched)


def step_fits_and_needs(
    sched: RunningBatch, reqs: list[RequestCache], iteration: int
) -> tuple[bool, StepNeeds | None]:
    """Whether the event step at ``iteration`` fits, and, read in the same pass, its requests' events and pages
    (``sglang_event_plans.ONE_PASS``, under the rules ``prepare_page_decode`` is proved for; else None)."""
    if plans.ONE_PASS and _page_only(sched):
        needs = plans.event_step_needs(sched.manager, sched.rules, reqs, iteration)
        return needs is not None, needs
    return event_step_fits(sched, reqs), None


def _event_step(
    sched: RunningBatch,
    reqs: list[RequestCache],
    iteration: int,
    in_flight,
    announced: bool,
    process: Callable[[], None] | None,
    needs: StepNeeds | None = None,
) -> Batch | None:
    """One decode step as the loop takes it with nothing to admit or process and room checked: the requests
    whose step may take a checkpoint or fire the SWA free (the rules' closed form says so) free out of their
    window first, then each request in batch order plans its step (those and the ones starting a page through
    ``prepare_decode``; the others' plan is only their next token), and every step completes. The decode half's
    eviction for the batch and each step's eviction ahead find the room free, so they are not asked. The batch is
    made only where it is ``announced`` (the bounds read it); else None. ``needs``: the step's events and pages,
    read already (``step_fits_and_needs``; None: read here)."""
    manager = sched.manager
    if in_flight is not None:  # the run's first event step: the trigger reads which steps are in flight
        plans.begin_decode_pass(manager, sched.rules, in_flight, _decode_pass_proved(sched))
    if manager.has_swa:  # _prefill: hybrid SWA retries admission every pass
        sched.batch_is_full = False
    if needs is None:
        phase = iteration + manager.policy.iteration_phase
        eventful = [sched.rules.plain_decode_steps(req, phase) <= 0 for req in reqs]
    else:
        eventful = needs.events
    for req, event in zip(reqs, eventful, strict=True):  # maybe_evict_swa, before any allocation
        if event:
            manager.free_out_of_window(req.request_id, iteration)
    batch = Batch(iteration) if announced else None
    if needs is not None:
        plans.plan_needs(manager, reqs, needs, iteration, batch)
    else:
        plans.plan_each(manager, reqs, eventful, iteration, batch, _page_only(sched))
    if process is not None:  # process_batch_result of the step in flight, after this step's launch
        process()
    if needs is not None:
        manager.complete_decodes(reqs)
    else:
        for req in reqs:
            manager.complete_decode(req.request_id)
    return batch
