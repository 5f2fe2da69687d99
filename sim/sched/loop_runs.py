"""Batch decode runs of FreeToken's loop and the default loop (timed mode): the running requests' decode steps,
those that start pages, free SWA or take checkpoints included, taken in one event with nothing to admit, chunk,
process or finish in between, exactly as the loop's full steps would take them.

As in SGLang's loop (``sim/sched/sglang_runs.py``), stretches of steps that free no SWA and take no checkpoint
(``batch_decode_steps``) allocate the pages they start in one go, while every KV pool keeps, after each step, a
page per request and the engine's slack; so no step's decode check, eviction ahead or reservation does anything
but allocate. An *event* step (some request's SWA free or checkpoint may come) is the loop's own decode half:
these loops plan each request's step in full before the next one's (``prepare_decode``: its decode check, its
SWA free, its eviction ahead and allocation, in batch order; the default loop begins its pass first and settles
each), then every step completes. It is taken only where its pages leave the same room and its new checkpoint
states are free on pools apart; the run stops before a step that might evict, refuse or retract.
"""

from __future__ import annotations

from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, Refusal
from sim.sched.batch import (
    Batch,
    BatchItem,
    DecodeBatch,
    FullStep,
    batch_lengths,
    step_fits_room,
    take_quiet_stretch,
)
from sim.sched.freeing_runs import join_step_runs, take_freeing_stretch
from sim.sched.request import RequestState

# False: an event step builds its batch though nobody reads it (the reference; tests/test_stretch_starts_once.py
# holds both equal); True: only where the bounds read it
EVENT_BATCH_WHEN_READ = True
# False: such a step plans every request in full (the reference, as above); True: where its batch is not read, a
# request whose step is quiet only moves its length (``_quiet_or_planned``)
LEAN_QUIET_REQUESTS = True
# True: where the bounds read an event step's batch, its quiet requests too only move their lengths, and the batch
# keeps the lengths and the others' plans (a ``DecodeBatch``: the recorder reads the lengths); False: every
# request planned in full, the batch of their plans (the reference; tests/test_bounds_fast_paths_property.py)
EVENT_BATCH_FROM_LENGTHS = True
# True: where no step event is listened to, a stretch runs through the SWA frees of the rules that allow it
# (``sim/cache/swa_free_runs.py``: SGLang's outside the overlap loop), which were event steps; False: a stretch
# stops at each (the reference; tests/test_swa_free_runs.py holds both equal)
FOLD_SWA_FREES = True
# True: where only batch readers listen to ``StepStarted`` (the bounds' recorder) and event steps' batches are read
# from their lengths, stretches fold the SWA frees too, each step the loop would take in full carrying the batch it
# would announce (``freeing_runs.step_runs``, due steps alone); False: any listener turns the folds off (the reference;
# tests/test_swa_free_runs_bounds.py holds both equal)
ANNOUNCED_FOLDS = True


def batch_run_allowed(manager: CacheManager, runs: list[RequestState], through_last: bool = False) -> int:
    """How many steps a batch run of ``runs`` (all past their prompt) may be asked for: each stops a step short
    of its last output (the step that ends it goes through the loop), or ``through_last`` takes that step too
    (``take_last_output_step``); 0 where the pools have no room for one."""
    fewest = min(run.output_len - run.decoded - 2 for run in runs) + through_last
    if fewest <= 0:
        return 0
    reqs = [manager.requests[run.request_id] for run in runs]
    return fewest if manager.batch_run_room(reqs) >= 0 else 0


def chunk_stays_stalled(manager: CacheManager, req: RequestCache, budget: int) -> bool:
    """Whether the prompt chunk of ``req`` (in its prompt) is sized to nothing under ``budget`` now and at every
    step of a batch run, whatever pages the run starts, SWA it frees or checkpoints it takes: where the budget
    leaves it nothing, or where it is a first chunk the rules find stalled because the cap their admission check
    set (``first_chunk_len``) cuts it to nothing; neither the pools nor the pass move that cap (SGLang's
    ``chunk_stalled_at``). A later chunk's stall hangs on the pools and is not said to hold."""
    rules = manager.rules
    chunk = rules.budgeted_chunk(req, budget)
    if chunk <= 0:
        return True
    if req.kv_len != req.cached_len or rules.first_chunk_len(req, chunk) > 0:
        return False
    return rules.chunk_stalled_at(manager, req, chunk, 0)


def take_loop_run(
    manager: CacheManager,
    runs: list[RequestState],
    iteration: int,
    max_steps: int,
    begins_pass: bool,
    settles: bool,
) -> tuple[int, list[FullStep]]:
    """Up to ``max_steps`` decode steps of ``runs`` (in the loop's batch order) from ``iteration`` on; returns
    how many were taken (fewer where a step might evict) and the full steps among them. ``begins_pass``: each
    step of the loop begins a scheduling pass (which admits nothing) before its decodes; ``settles``: it
    settles each request it plans (the default loop)."""
    reqs = [manager.requests[run.request_id] for run in runs]
    announced = manager.events.reads_batches()  # the bounds read each full step's batch
    folds = FOLD_SWA_FREES and _folds_swa_frees(manager, reqs[0], announced)
    # where the bounds read the batches: the run's offsets of the steps the loop takes in full (event steps)
    told: set[int] | None = set() if folds and announced else None
    done = 0
    full_steps: list[FullStep] = []
    while done < max_steps:
        taken = take_freeing_stretch(manager, reqs, iteration, done, max_steps, told) if folds else None
        if taken is None:
            taken = take_quiet_stretch(manager, reqs, iteration, done, max_steps, announced)
        stretch, stretch_steps = taken
        if stretch:
            join_step_runs(full_steps, stretch_steps, told)
            done += stretch
            continue
        if not event_step_fits(manager, reqs):
            break
        batch = _event_step(manager, reqs, iteration + done, begins_pass, settles, announced)
        full_steps.append(FullStep(done, 0, batch, manager.usage()))
        done += 1
    for run in runs:
        run.decoded += done
    return done, full_steps


def _folds_swa_frees(manager: CacheManager, req: RequestCache, announced: bool) -> bool:
    """Whether the run's stretches may take SWA frees: the rules take them so (asked once a run: nothing in it
    begins a pass with a step in flight), and no listener reads the run's steps as events (their grouping into
    full and plain steps), but batch readers, where the loop's own event steps would hand them lengths batches
    (``ANNOUNCED_FOLDS``)."""
    events = manager.events
    if events.reads_step_events():
        return False
    announces_lengths = ANNOUNCED_FOLDS and EVENT_BATCH_FROM_LENGTHS and EVENT_BATCH_WHEN_READ
    if announced and not (announces_lengths and events.only_batch_readers()):
        return False
    rules = manager.rules
    return isinstance(rules, SGLangRules) and rules.checkpoint_free_steps(req) is not None


def event_step_fits(manager: CacheManager, reqs: list[RequestCache]) -> bool:
    """Whether the next step, taken in full, evicts nothing (``step_fits_room``): each request's turn then
    finds its page and the slack free."""
    return step_fits_room(manager, reqs, manager.batch_run_room(reqs))


def take_last_output_step(
    manager: CacheManager, runs: list[RequestState], iteration: int, offset: int
) -> FullStep | None:
    """The step that gives some of ``runs`` their last output, as the default loop's full step takes it where
    nothing else is scheduled (its decodes only: nothing admitted, every chunk stalled): a pass begun, each
    request's step planned and settled in batch order, then, in that order, each completed and, where that was
    its last output, finished at once (``postprocess``). None, nothing taken, where the step might evict. The
    step is ``offset`` steps into a run; its pools are read after the finishes, as the loop's row reads them."""
    reqs = [manager.requests[run.request_id] for run in runs]
    if not event_step_fits(manager, reqs):
        return None
    # read (by batch readers only: ``last_output.py``) after the finishes below, so from its lengths
    lengths = batch_lengths(reqs, manager.events.reads_batches())
    manager.begin_pass()
    batch: Batch = _planned_decodes(manager, reqs, iteration, settles=True)
    if lengths is not None:
        batch = DecodeBatch.of_requests(iteration, reqs, lengths, 0, [item.plan for item in batch.items])
    ended: list[RequestState] = []
    for run in runs:
        manager.complete_decode(run.request_id)
        run.decoded += 1
        if run.decoded == run.output_len - 1:
            run.inserted_len = manager.finish(run.request_id).inserted_len
            ended.append(run)
    return FullStep(offset, 0, batch, manager.usage(), finished=tuple(ended))


def _event_step(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    begins_pass: bool,
    settles: bool,
    announced: bool,
) -> Batch | None:
    """One decode step as the loop takes it with nothing but decodes to schedule and room checked: each
    request's step planned in batch order, then each completed. Its batch, where the bounds read it
    (``announced``), else None (``EVENT_BATCH_WHEN_READ``; nothing else reads an event step's batch)."""
    if begins_pass:
        manager.begin_pass()
    if (announced and not EVENT_BATCH_FROM_LENGTHS) or not EVENT_BATCH_WHEN_READ:
        batch = _planned_decodes(manager, reqs, iteration, settles)
        for req in reqs:
            manager.complete_decode(req.request_id)
        return batch
    # the lengths and states before any request's step: a quiet request's plan is the plain one they make
    lengths_batch = (
        DecodeBatch.of_requests(iteration, reqs, [req.kv_len for req in reqs], 0) if announced else None
    )
    plans = [_quiet_or_planned(manager, req, iteration, settles) for req in reqs]
    for req, plan in zip(reqs, plans, strict=True):
        if plan is None:
            manager.take_plain_decodes(req, 1)  # ``complete_decode`` with no checkpoint planned
        else:
            manager.complete_decode(req.request_id)
    if lengths_batch is not None:
        lengths_batch.plans = plans
    return lengths_batch


def _quiet_or_planned(
    manager: CacheManager, req: RequestCache, iteration: int, settles: bool
) -> ChunkPlan | None:
    """The request's decode step planned (``_planned_decode``), or None where it is quiet
    (``LEAN_QUIET_REQUESTS``): at no page boundary, with its slot held, and no SWA free or checkpoint by the
    rules' closed form (``plain_decode_steps``), no commit pending (the room check asked). There
    ``prepare_decode`` would plan an empty step (the plain plan of its length and state): the refusal check
    (SGLang's asks only at a page boundary), the eviction ahead (the room checked keeps the slack free) and
    ``settle`` find nothing to do."""
    if (
        LEAN_QUIET_REQUESTS
        and req.kv_len % manager.page_size
        and not req.pages_needed(req.kv_len + 1)
        and manager.rules.plain_decode_steps(req, iteration + manager.policy.iteration_phase) > 0
    ):
        req.planned = ()
        return None
    return _planned_decode(manager, req, iteration, settles)


def _planned_decodes(manager: CacheManager, reqs: list[RequestCache], iteration: int, settles: bool) -> Batch:
    """Each request's decode step planned in batch order (room checked: none is refused)."""
    batch = Batch(iteration)
    for req in reqs:
        batch.items.append(BatchItem(_planned_decode(manager, req, iteration, settles), False))
    return batch


def _planned_decode(manager: CacheManager, req: RequestCache, iteration: int, settles: bool) -> ChunkPlan:
    """The request's decode step planned (room checked: it is not refused), and settled where the loop does."""
    plan = manager.prepare_decode(req.request_id, iteration)
    if isinstance(plan, Refusal):
        raise AssertionError(f"{req.request_id}: a batch run's event step refused ({plan})")
    if settles:
        manager.settle(req.request_id, 1)
    return plan
