"""A batch run's idle event steps folded into one move (SGLang's rules, the ``tokens`` SWA trigger).

Under the retain floor a request's out-of-window free stops at its last checkpoint's window: once its trigger
fires (``pre_len - W >= frontier + interval``) it fires at every step, but the target it computes stays at the
frontier until the next checkpoint moves the floor. Each such step is an *event* step of the run
(``sglang_runs._event_step``: a full step with its row marked from the pools), yet it frees nothing and takes no
checkpoint: it only lengthens every request and allocates the pages it starts, in batch order, as a quiet
stretch does. Where that is certain for the coming steps they are taken at once (``take_batch_decodes``), each
still handed on as the full step it was: one ``FullStep`` per step, its batch where the bounds read it, and its
pools as the pages it moved from free to running (the step log's moves: the pools a mark would read).

Certain means, for every step ``k`` of the fold: some request's trigger is past its silence (``silent_steps``
0 stays 0 while the frontier holds: the step is an event step), no request reaches its track grid (no
checkpoint), every request's free is a no-op (its target at step 0 as the rules compute it, and at the last
step as a bound: the frontier rule ``floor(max(frontier, prefix, min(pre_len - W, floor)))`` does not fall as
``pre_len`` grows, and past step 0 the floor is the last checkpoint's, with no lag substitution), and the pages
started so far fit the run's room (``event_step_fits`` at each step: nothing is freed in between).
"""

from __future__ import annotations

from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.sched.batch import FullStep, batch_lengths, page_step_batch

# True: a request whose free moves nothing at the next step but may at a later one still lets that one step
# fold (the overlap loop's lag: the trigger's closed form, read without it, names the step before the free
# fires; ~2,400 of `sglang`'s 14,132 timed event steps at 4,000); False: no fold there (the reference)
FIRST_IDLE_STEP = True
# True: where no one reads the steps' batches, a fold runs through the first decode checkpoint that moves no
# pool (``checkpoint_moves_no_pool``) and ends with it, each taken at that step after its pages (~4,800 of
# those event steps); False: it stops before each (the reference). Ending there keeps the retain floor the
# bound reads the one every folded step's free sees.
THROUGH_CHECKPOINT = True


def idle_event_steps(
    manager: CacheManager,
    rules: SGLangRules,
    reqs: list[RequestCache],
    phase: int,
    max_steps: int,
    checkpoints: bool = False,
) -> int:
    """How many of the next ``max_steps`` steps of ``reqs`` (from the rules' iteration ``phase`` on) are event
    steps that free nothing, take no checkpoint (``checkpoints``: but the last may take those that move no
    pool, ``THROUGH_CHECKPOINT``) and fit the room; 0 where that cannot be said."""
    resolved, trigger = rules.resolved, rules.trigger
    if trigger.by_iterations or not resolved.has_swa or any(req.commit_pending for req in reqs):
        return 0
    steps, stuck, at_once = max_steps, [], checkpoints and THROUGH_CHECKPOINT
    for req in reqs:
        steps = min(steps, _checkpoint_bound(rules, req, at_once))
        silent = trigger.silent_steps(req, phase)
        if silent:
            steps = min(steps, silent)  # not eventful before then: its free is not asked
        else:
            stuck.append(req)
    if steps <= 0 or not (stuck or _checkpoint_steps(rules, reqs, 1)):  # each step an event step
        return 0
    for req in stuck:
        steps = _idle_steps(rules, req, phase, steps)
        if not steps:
            return 0
    return _fitting_steps(manager, reqs, steps)


def _checkpoint_bound(rules: SGLangRules, req: RequestCache, at_once: bool) -> int:
    """The steps a fold may take before the request's next decode checkpoint, or through it where it moves no
    pool and ``at_once``; no bound without MAMBA."""
    if not rules.resolved.has_mamba:
        return 1 << 62
    before = -(req.kv_len + 1) % rules.resolved.track_grid
    return before + 1 if at_once and checkpoint_moves_no_pool(rules, req) else before


def checkpoint_moves_no_pool(rules: SGLangRules, req: RequestCache) -> bool:
    """Whether the request's next decode checkpoint, alone, moves no pool: tracked (``decode_checkpoint``), its
    slot a spare of its own (``_plan`` pops one) and the one it supersedes, if any, back to its spares
    (``give_back_slot``: fewer than its pair's after the pop). ``swa_free_runs.folds_checkpoints`` asks more (a
    checkpoint to supersede), so that a stretch's series of them leaves the answer the same after each."""
    spares = len(req.spare_states)
    tracked = rules.resolved.has_mamba and not rules.decode_untracked
    return tracked and spares > 0 and (req.checkpoint is None or spares < rules.admission_states)


def _checkpoint_steps(rules: SGLangRules, reqs: list[RequestCache], num_steps: int) -> list[tuple[int, int]]:
    """(step offset, index in ``reqs``) of each decode checkpoint the next ``num_steps`` steps take, in step then
    batch order (a fold's: at most one a request, at its last step)."""
    if not rules.resolved.has_mamba:
        return []
    grid = rules.resolved.track_grid
    found = [(-(req.kv_len + 1) % grid, index) for index, req in enumerate(reqs)]
    return sorted(at for at in found if at[0] < num_steps)


def _idle_steps(rules: SGLangRules, req: RequestCache, phase: int, steps: int) -> int:
    """How many of the request's next ``steps`` steps its out-of-window free moves nothing at: all where it
    moves nothing at step 0 as asked and at the last as a bound on every later step (the floor past step 0 is
    the last checkpoint's); else step 0 alone where it moves nothing there (``FIRST_IDLE_STEP``); else none."""
    target = rules.decode_free_target(req, phase)
    if target is not None and target > req.swa_frontier:
        return 0
    if steps == 1:
        return 1
    bound = rules.frontier(req, req.kv_len + steps - 1, rules.retain_floor(req))
    if bound <= req.swa_frontier:
        return steps
    return 1 if FIRST_IDLE_STEP else 0


def _fitting_steps(manager: CacheManager, reqs: list[RequestCache], steps: int) -> int:
    """The first ``steps`` steps, cut before the first whose pages (with those started before it) pass the room
    a batch run keeps (``event_step_fits``)."""
    starts = manager.page_starts(reqs, steps)
    if starts is None:
        return 0
    room = manager.batch_run_room(reqs)
    if len(starts) > room:
        return starts[room][0] if room >= 0 else 0
    return steps


def take_idle_event_steps(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    num_steps: int,
    announced: bool,
) -> list[FullStep]:
    """Take ``num_steps`` idle event steps (``idle_event_steps``) from ``iteration + done`` on at once: their
    pages in step then batch order, the lengths, then the checkpoints their last step takes, in batch order,
    as its plans pop a spare slot and its completions take it; returns each step as the full step it was."""
    lengths = batch_lengths(reqs, announced)
    due = _checkpoint_steps(manager.rules, reqs, num_steps)
    positions = [reqs[index].kv_len + offset + 1 for offset, index in due]
    pages_at = dict(manager.take_batch_decodes(reqs, num_steps))
    for (_, index), position in zip(due, positions, strict=True):
        req = reqs[index]
        req.planned = ((position, req.spare_states.pop()),)
        manager.take_planned_checkpoint(req)
    full_steps: list[FullStep] = []
    for offset in range(num_steps):
        batch = page_step_batch(reqs, lengths, iteration + done + offset, offset)
        full_steps.append(FullStep(done + offset, pages_at.get(offset, 0), batch, None))
    return full_steps
