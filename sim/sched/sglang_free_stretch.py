"""An SGLang batch run's stretch that takes the null rules' out-of-window SWA frees inside it (``no-cache``: SGLang
``--disable-radix-cache``), where the reference stops a quiet stretch before each step whose free may fire and
takes that step as an event step (``sglang_runs._event_step``): at 4,000 Mooncake requests ~21,800 event steps,
most of them one request's free.

Once the run's pass is begun (its first event step), nothing in the run moves what a free or its trigger reads but
the requests themselves: the steps in flight (the trigger's lag, ``decode_free_target``) stay the running batch,
the null rules take no checkpoint (``decode_checkpoint`` None, ``plain_decode_steps`` the trigger's silence alone)
and begin no pass. So the stretch walks the steps the reference would take in full (some request's
``plain_decode_steps`` not positive: *due*), and at each does what its event step does: each due request's free
in batch order, through the manager's own ``free_out_of_window`` with the request's length and steps as the step
sees them, before any page of the step; the page starts of the steps before it handed out first, in step then
batch order. The rest of an event step does nothing here: with the room kept (a page per request and the slack in
every KV pool after each step) ``decode_refusal``, ``evict_ahead(0)`` and ``reserve`` find the pools free, and a
request that is not due finds its free silent (its trigger cannot fire where its silence is positive, lag or not).

The room is the pools' before the stretch less the pages started so far (what a free gives back only adds to it),
so every step the stretch takes fits where the reference's does. The stretch ends where the reference's own
pieces end: at the run's end, or just after a due step (the reference begins a quiet stretch there); where the
room ends first, it ends after the last due step inside it (none: nothing is taken). Its full steps are the
reference's: each due step alone, its pages and frees as moves (``FullStep.swa_freed``), the page-starting steps
between as ``page_step_runs`` makes them, the batches from the lengths where the bounds read them. Switch:
``FREES_IN_STRETCH`` (off: the reference; tests/test_null_free_stretch_property.py holds both equal).
"""

from __future__ import annotations

from bisect import bisect_left
from heapq import heappop, heappush
from typing import Protocol

from sim.cache.components import SWA
from sim.cache.engines.nocache import NoCacheRules
from sim.cache.manager import CacheManager
from sim.cache.plain_decodes import counted_starts, fitting_starts
from sim.cache.request import RequestCache
from sim.cache.swa_free_runs import allocate_starts_before, free_counted
from sim.sched import counted_frees, run_steps
from sim.sched.batch import FullStep, batch_lengths, page_step_batch
from sim.sched.freeing_runs import step_runs
from sim.sched.stretch_steps import told_as_one

FREES_IN_STRETCH = True
# True: where the run's full steps are told whole (``run_steps.WHOLE_RUNS``), a stretch's page steps are told to the
# bounds' recorder as one ``StretchSteps`` on its first full step (``sim/sched/stretch_steps.py``); False: a
# ``DecodeBatch`` a full step (the reference; tests/test_stretch_steps_property.py holds both equal)
STRETCH_AS_ONE = True
# the bound of a step's own start: below every request's index, so a step's frees come before all its pages
# (the default loop's stretch bounds them request by request, ``swa_free_runs``)
STEP_START = -1


def stretch_takes_frees(manager: CacheManager) -> bool:
    """Whether the run's stretches may take the SWA frees (asked once a run): the null rules exactly, on separate
    pools, and no listener reads the run's steps as events, but batch readers (the bounds)."""
    events = manager.events
    if not FREES_IN_STRETCH or type(manager.rules) is not NoCacheRules or events.reads_step_events():
        return False
    if manager.topology.name != "separate":
        return False
    return not events.reads_batches() or events.only_batch_readers()


class FreeingBatch(Protocol):
    """What the stretch reads and moves of the SGLang scheduler (``sglang_runs.RunningBatch``)."""

    manager: CacheManager
    batch_is_full: bool


def take_freeing_stretch(
    sched: FreeingBatch,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    max_steps: int,
    announced: bool,
) -> tuple[int, list[FullStep]]:
    """The decode steps from ``iteration + done`` on (the run's ``done`` taken) with their SWA frees, taken at once;
    returns how many (0: none) and their full steps. A due step (an event step) resets ``batch_is_full`` under
    hybrid SWA, as the reference's does (``_prefill``: it retries admission every pass)."""
    manager, num_steps = sched.manager, max_steps - done
    spare = manager.batch_run_room(reqs)
    if spare < 0 or any(req.commit_pending for req in reqs):
        return 0, []
    starts = manager.page_starts(reqs, num_steps)
    if starts is None:
        return 0, []
    fitting = fitting_starts(starts, num_steps, spare)[0]
    lengths = batch_lengths(reqs, announced)
    due_at, freed, stretch, allocated = _frees_and_starts(
        manager, reqs, iteration + done, fitting, starts, num_steps
    )
    for req in reqs:
        manager.take_plain_decodes(req, stretch)
    runs = step_runs(counted_starts(starts[:allocated]), freed, done, set(due_at), extends_break=False)
    if lengths is not None and STRETCH_AS_ONE and run_steps.WHOLE_RUNS:
        runs = told_as_one(runs, reqs, lengths, iteration, done)
    elif lengths is not None:
        runs = [_with_batch(run, reqs, lengths, iteration, done) for run in runs]
    if due_at and manager.has_swa:
        sched.batch_is_full = False
    return stretch, runs


def _frees_and_starts(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    fitting: int,
    starts: list[tuple[int, int]],
    num_steps: int,
) -> tuple[list[int], list[tuple[int, int]], int, int]:
    """The stretch's frees (``_take_frees``; request by request where their order is unread, ``counted_frees``)
    and its page starts: the due steps' offsets, the SWA pages freed by step, the steps taken, the starts given."""
    by_request = None
    if counted_frees.frees_by_request(manager):
        by_request = counted_frees.RequestFrees(manager, reqs, iteration)
        (due_at, freed), allocated = by_request.take(fitting), 0
    else:
        due_at, freed, allocated = _take_frees(manager, reqs, iteration, fitting, starts)
    stretch = num_steps if fitting == num_steps else (due_at[-1] + 1 if due_at else 0)
    if by_request is None:
        allocated = allocate_starts_before(manager, reqs, starts, allocated, (stretch, STEP_START))
        return due_at, freed, stretch, allocated
    allocated = bisect_left(starts, (stretch, STEP_START))
    by_request.hand_out_rest(stretch)
    return due_at, freed, stretch, allocated


def _take_frees(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    fitting: int,
    starts: list[tuple[int, int]],
) -> tuple[list[int], list[tuple[int, int]], int]:
    """Each due step's frees among the first ``fitting`` steps, in step then batch order, the page starts before
    each step handed out first. Returns the due steps' offsets, (offset, SWA pages freed) of each step that freed
    some, and how many starts are handed out. The requests' lengths are as before it."""
    rules, phase = manager.rules, iteration + manager.policy.iteration_phase
    at_start = [(req.kv_len, req.decode_steps) for req in reqs]
    due: list[tuple[int, int]] = []
    for index, req in enumerate(reqs):
        _push_due(rules, due, req, at_start[index], index, phase, 0, fitting)
    swa_pool = manager.pools[SWA] if manager.has_swa else None
    due_at: list[int] = []
    freed_at: dict[int, int] = {}
    allocated = 0
    while due:
        offset, index = heappop(due)
        if not due_at or due_at[-1] != offset:  # the step's frees come before any of its pages
            allocated = allocate_starts_before(manager, reqs, starts, allocated, (offset, STEP_START))
            due_at.append(offset)
        req = reqs[index]
        req.kv_len, req.decode_steps = at_start[index][0] + offset, at_start[index][1] + offset
        free_counted(manager, swa_pool, req, iteration, offset, freed_at)
        _push_due(rules, due, req, at_start[index], index, phase, offset + 1, fitting)
    for req, (kv_len, decode_steps) in zip(reqs, at_start, strict=True):
        req.kv_len, req.decode_steps = kv_len, decode_steps
    return due_at, sorted(freed_at.items()), allocated


def _push_due(
    rules: NoCacheRules,
    due: list[tuple[int, int]],
    req: RequestCache,
    at_start: tuple[int, int],
    index: int,
    phase: int,
    offset: int,
    fitting: int,
) -> None:
    """The request's first due step from ``offset`` on, if among the first ``fitting``: where ``plain_decode_steps``
    at that step is not positive, as the reference's quiet stretch asks it (its silence counts down step by step
    until its free, so asked once it names the step every later ask before it names). ``at_start``: the request's
    length and steps before the stretch; they are left moved to ``offset``."""
    if offset >= fitting:
        return
    req.kv_len, req.decode_steps = at_start[0] + offset, at_start[1] + offset
    silent = rules.plain_decode_steps(req, phase + offset)
    if offset + silent < fitting:
        heappush(due, (offset + max(silent, 0), index))


def _with_batch(
    run: FullStep, reqs: list[RequestCache], lengths: list[int], iteration: int, done: int
) -> FullStep:
    """The full step with its first step's batch, ``lengths`` those before the stretch (at run offset ``done``)."""
    return run._replace(batch=page_step_batch(reqs, lengths, iteration + run.offset, run.offset - done))
