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


def idle_event_steps(
    manager: CacheManager, rules: SGLangRules, reqs: list[RequestCache], phase: int, max_steps: int
) -> int:
    """How many of the next ``max_steps`` steps of ``reqs`` (from the rules' iteration ``phase`` on) are event
    steps that free nothing, take no checkpoint and fit the room; 0 where that cannot be said."""
    resolved, trigger = rules.resolved, rules.trigger
    if trigger.by_iterations or not resolved.has_swa:
        return 0
    grid = resolved.track_grid if resolved.has_mamba else 0
    steps, stuck = max_steps, []
    for req in reqs:
        if req.commit_pending:
            return 0
        if grid:
            steps = min(steps, -(req.kv_len + 1) % grid)  # the steps before its checkpoint
        silent = trigger.silent_steps(req, phase)
        if silent:
            steps = min(steps, silent)  # not eventful before then: its free is not asked
        else:
            stuck.append(req)
    return _stuck_steps(manager, rules, reqs, stuck, phase, steps)


def carried_idle_steps(
    manager: CacheManager,
    rules: SGLangRules,
    reqs: list[RequestCache],
    dues: list[int],
    at: int,
    phase: int,
    max_steps: int,
) -> int:
    """``idle_event_steps`` at the run's step ``at`` (the rules' ``phase``) read off the requests' due steps (``at``
    and their ``plain_decode_steps``: the least of the steps before the checkpoint and the trigger's silence): a
    positive answer bounds the steps as its two terms did; an answer of 0 is a stuck trigger's where the
    checkpoint is not due (else there are no steps)."""
    resolved = rules.resolved
    if rules.trigger.by_iterations or not resolved.has_swa:
        return 0
    grid = resolved.track_grid if resolved.has_mamba else 0
    steps, stuck = max_steps, []
    for req, due in zip(reqs, dues, strict=True):
        if req.commit_pending:
            return 0
        if due > at:
            steps = min(steps, due - at)
            continue
        if grid:
            checkpoint_in = -(req.kv_len + 1) % grid  # the steps before its checkpoint
            if not checkpoint_in:
                return 0
            steps = min(steps, checkpoint_in)
        stuck.append(req)
    return _stuck_steps(manager, rules, reqs, stuck, phase, steps)


def _stuck_steps(
    manager: CacheManager,
    rules: SGLangRules,
    reqs: list[RequestCache],
    stuck: list[RequestCache],
    phase: int,
    steps: int,
) -> int:
    """Of the next ``steps`` steps (each an event step for the ``stuck`` requests), those that free nothing and
    fit the room; 0 where that cannot be said."""
    if steps <= 0 or not stuck:
        return 0
    for req in stuck:
        if not _frees_nothing(rules, req, phase, steps):
            return 0
    return _fitting_steps(manager, reqs, steps)


def _frees_nothing(rules: SGLangRules, req: RequestCache, phase: int, steps: int) -> bool:
    """Whether the request's out-of-window free moves nothing at any of its next ``steps`` steps: at step 0
    as asked, and at the last as a bound on every later step (the floor past step 0 is the last checkpoint's)."""
    target = rules.decode_free_target(req, phase)
    if target is not None and target > req.swa_frontier:
        return False
    if steps == 1:
        return True
    bound = rules.frontier(req, req.kv_len + steps - 1, rules.retain_floor(req))
    return bound <= req.swa_frontier


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
    pages in step then batch order, the lengths; returns each step as the full step it was."""
    lengths = batch_lengths(reqs, announced)
    pages_at = dict(manager.take_batch_decodes(reqs, num_steps))
    full_steps: list[FullStep] = []
    for offset in range(num_steps):
        batch = page_step_batch(reqs, lengths, iteration + done + offset, offset)
        full_steps.append(FullStep(done + offset, pages_at.get(offset, 0), batch, None))
    return full_steps
