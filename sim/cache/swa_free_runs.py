"""Batch decode stretches that take the out-of-window SWA frees inside them (the default loop's and FreeToken's
batch runs, ``sim/sched/loop_runs.py``), where the rules say so (``SGLangRules.checkpoint_free_steps``: outside
a pass with a step in flight, so ``no-cache``).

A quiet stretch (``batch_decode_stretch``) stops at the first step some request's SWA free may fire, and the
loop takes that step as an event step (its room checked, each request planned): at 4,000 requests of
``no-cache`` ~8,000 of its 13,199 event steps only free SWA (with the page they start). A *freeing* stretch runs
to the first checkpoint instead, with the same room (what a free gives back only adds to it), and takes each
free where the step would: at its step, in batch order, each request's free before the page it starts
(``prepare_decode``), through the manager's own ``free_out_of_window`` with the request's length and steps as
the step sees them; the next free of that request from the rules' closed form (``plain_decode_steps``: the
trigger's silent steps), asked again at the step it names. The step table reads each free as pages moved back
from running to free in the SWA pool at its step (``FullStep.swa_freed``). Switch: ``loop_runs.FOLD_SWA_FREES``.

A request whose decode checkpoints move no pool (``folds_checkpoints``: the slot comes from its ping-pong pair and
the last one goes back to it) has them taken inside the stretch too, each at its step after that step's frees and
pages (``complete_decode`` after ``prepare_decode``): at 4,000 requests of ``no-cache`` they were every one of its
4,139 event steps. Switch: ``FOLD_CHECKPOINTS``.
"""

from __future__ import annotations

from heapq import heappop, heappush

from sim.cache.components import SWA
from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.plain_decodes import fitting_starts
from sim.cache.pools import Pool
from sim.cache.request import RequestCache

# True: a freeing stretch runs through the decode checkpoints that move no pool (``folds_checkpoints``), each
# taken at its step; False: it stops before each, which the loop takes as an event step (the reference;
# tests/test_checkpoint_folds.py holds both equal)
FOLD_CHECKPOINTS = True


def freeing_stretch(
    manager: CacheManager, reqs: list[RequestCache], iteration: int, max_steps: int
) -> tuple[int, list[tuple[int, int]]] | None:
    """How many of the next ``max_steps`` decode steps of ``reqs`` take no checkpoint while the pages they
    start leave, after each step, room for a page per request and the engine's slack in every KV pool, and
    those steps' page starts ((step offset, index in ``reqs``), sorted); 0 where that cannot be said, None
    where the rules take no free in a stretch."""
    rules, steps = manager.rules, max_steps
    if not isinstance(rules, SGLangRules):
        return None
    for req in reqs:
        free_steps = rules.checkpoint_free_steps(req)
        if free_steps is None:
            return None
        if req.commit_pending:  # a commit waits for the next step's processing
            return 0, []
        if not (FOLD_CHECKPOINTS and folds_checkpoints(rules, req)):
            steps = min(steps, free_steps)
    spare = manager.batch_run_room(reqs)
    if steps <= 0 or spare < 0:
        return 0, []
    starts = manager.page_starts(reqs, steps)
    if starts is None:
        return 0, []
    return fitting_starts(starts, steps, spare)


def folds_checkpoints(rules: SGLangRules, req: RequestCache) -> bool:
    """Whether a stretch may take the request's decode checkpoints: tracked ones (``decode_checkpoint``) whose
    slot is a spare of its own (``_plan`` pops one, no pool's) and whose last one goes back to its spares
    (``give_back_slot``: fewer than its pair's), so their count, and the answer, stay the same after each."""
    spares = len(req.spare_states)
    tracked = rules.resolved.has_mamba and not rules.decode_untracked
    return tracked and req.checkpoint is not None and 0 < spares < rules.admission_states


def take_freeing_decodes(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    num_steps: int,
    starts: list[tuple[int, int]],
    due_at: list[int] | None = None,
) -> list[tuple[int, int]]:
    """What ``num_steps`` decode steps (``freeing_stretch``) record: the pages they start and the SWA they
    free, in step then batch order, and the lengths. Returns (step offset, SWA pages freed) of each step that
    freed some, in step order. ``due_at`` (where given) gets the offset of each free and checkpoint taken, in
    step order: the steps a quiet stretch stops at, which the loop takes in full."""
    rules = manager.rules
    assert isinstance(rules, SGLangRules)  # freeing_stretch's
    at_start = [(req.kv_len, req.decode_steps, iteration, num_steps) for req in reqs]
    due = _first_due(rules, manager, reqs, at_start)
    swa_pool = manager.pools[SWA] if manager.has_swa else None
    freed_at: dict[int, int] = {}
    allocated = 0
    while due:
        offset, index = heappop(due)
        allocated = allocate_starts_before(manager, reqs, starts, allocated, (offset, index))
        if due_at is not None:
            due_at.append(offset)
        if index >= len(reqs):
            _take_checkpoint(rules, manager, due, index, reqs, at_start, offset)
            continue
        req = reqs[index]
        req.kv_len, req.decode_steps = at_start[index][0] + offset, at_start[index][1] + offset
        free_counted(manager, swa_pool, req, iteration, offset, freed_at)
        _push_next(rules, manager, due, req, index, at_start[index], offset + 1)
    allocate_starts_before(manager, reqs, starts, allocated, (num_steps, 0))
    for req, (kv_len, steps, _, _) in zip(reqs, at_start, strict=True):
        req.kv_len, req.decode_steps = kv_len, steps
        manager.take_plain_decodes(req, num_steps)
    return sorted(freed_at.items())


def _first_due(
    rules: SGLangRules,
    manager: CacheManager,
    reqs: list[RequestCache],
    at_start: list[tuple[int, int, int, int]],
) -> list[tuple[int, int]]:
    """The stretch's first turns, a heap of (step offset, index): where a request's next free may fire, and,
    at an index past the requests, a checkpoint's turn (after its step's frees and pages)."""
    due: list[tuple[int, int]] = []
    for index, req in enumerate(reqs):
        _push_next(rules, manager, due, req, index, at_start[index], 0)
        if FOLD_CHECKPOINTS and folds_checkpoints(rules, req):
            _push_checkpoint(rules, due, len(reqs) + index, req.kv_len, 0, at_start[index][3])
    return due


def _take_checkpoint(
    rules: SGLangRules,
    manager: CacheManager,
    due: list[tuple[int, int]],
    index: int,
    reqs: list[RequestCache],
    at_start: list[tuple[int, int, int, int]],
    offset: int,
) -> None:
    """The decode checkpoint of ``reqs[index - len(reqs)]`` at step ``offset``, as its step plans it (a spare
    slot) and completes it (``CheckpointSaved`` told where listened), and its next one pushed."""
    req = reqs[index - len(reqs)]
    kv_len, _, _, num_steps = at_start[index - len(reqs)]
    req.planned = ((kv_len + offset + 1, req.spare_states.pop()),)
    manager.take_planned_checkpoint(req)
    _push_checkpoint(rules, due, index, kv_len, offset + 1, num_steps)


def _push_checkpoint(
    rules: SGLangRules, due: list[tuple[int, int]], index: int, kv_len: int, offset: int, num_steps: int
) -> None:
    """The request's first decode checkpoint from step ``offset`` on, if inside the stretch: where the length
    after the step reaches the track grid (``decode_checkpoint``). ``kv_len``: its length at the stretch's
    start."""
    at = offset + -(kv_len + offset + 1) % rules.resolved.track_grid
    if at < num_steps:
        heappush(due, (at, index))


def _push_next(
    rules: SGLangRules,
    manager: CacheManager,
    due: list[tuple[int, int]],
    req: RequestCache,
    index: int,
    at_start: tuple[int, int, int, int],
    offset: int,
) -> None:
    """The first step from ``offset`` on where the request's free may fire (the rules' closed form, read with
    its length and steps at that step), if inside the stretch. ``at_start``: the request's length and steps at
    the stretch's start, and the stretch's first iteration and its steps. The stretch takes no checkpoint, so
    the closed form's checkpoint bound lies past it."""
    kv_len, decode_steps, iteration, num_steps = at_start
    if offset >= num_steps:
        return
    req.kv_len, req.decode_steps = kv_len + offset, decode_steps + offset
    quiet = rules.swa_silent_steps(req, iteration + offset + manager.policy.iteration_phase)
    if offset + quiet < num_steps:
        heappush(due, (offset + max(quiet, 0), index))


def free_counted(
    manager: CacheManager,
    swa_pool: Pool | None,
    req: RequestCache,
    iteration: int,
    offset: int,
    freed_at: dict[int, int],
) -> None:
    """The request's out-of-window free at the stretch's step ``offset`` (its length and steps already moved
    there), the SWA pages it gives back added to ``freed_at[offset]``."""
    free_before = swa_pool.num_free if swa_pool is not None else 0
    manager.free_out_of_window(req.request_id, iteration + offset)
    if swa_pool is not None and swa_pool.num_free > free_before:
        freed_at[offset] = freed_at.get(offset, 0) + swa_pool.num_free - free_before


def allocate_starts_before(
    manager: CacheManager,
    reqs: list[RequestCache],
    starts: list[tuple[int, int]],
    allocated: int,
    before: tuple[int, int],
) -> int:
    """The page starts from ``allocated`` on that come before ``before`` (step offset, index: that request's
    free comes before its page at that step), handed out as ``take_batch_decodes`` hands them; returns how
    many starts are allocated now."""
    end = allocated
    while end < len(starts) and starts[end] < before:
        end += 1
    if end == allocated:
        return end
    manager.hand_out_starts(reqs, starts[allocated:end])
    return end
