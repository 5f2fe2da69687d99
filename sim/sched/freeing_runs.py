"""A batch-run loop's freeing stretch (``sim/cache/swa_free_runs.py``) taken, and its full steps: each step that
starts pages or frees SWA, consecutive ones starting the same pages and freeing none after the first as one
(``FullStep.num_steps``), as ``page_step_runs`` makes them for a quiet stretch.

Where the bounds read each full step's batch (``loop_runs.ANNOUNCED_FOLDS``), the full steps are those the loop
takes with the frees left out of its stretches (the reference): each step a free or checkpoint is due at (an event
step there: a quiet stretch stops before it) alone, the page-starting steps between as ``page_step_runs`` makes
them, each with its first step's batch from the lengths before the stretch (``page_step_batch``). A stretch cut
by room is followed by the loop's next, from the same pools: the reference's quiet stretch that spans both has its
room from before the first (the frees since only add to it) and stops where the second does, so a page run over
the seam is one (``join_step_runs``).
"""

from __future__ import annotations

from sim.cache import swa_free_runs
from sim.cache.manager import CacheManager
from sim.cache.plain_decodes import counted_starts
from sim.cache.request import RequestCache
from sim.sched import batch as batch_module
from sim.sched.batch import DecodeBatch, FullStep, batch_lengths, page_step_batch

# True: a stretch's page-step batches share one list of its requests' ids and one of their states, read once (every
# batch is made after the stretch is taken, so each read them as they are now), each full step made with its batch;
# False: each batch reads them again and each full step is remade with it (``_with_batch``, the reference;
# tests/test_run_steps_property.py holds both equal)
SHARED_BATCH_LISTS = True


def take_freeing_stretch(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    max_steps: int,
    told: set[int] | None = None,
) -> tuple[int, list[FullStep]] | None:
    """The decode steps from ``iteration + done`` on up to the next checkpoint or the room's end, their SWA
    frees included, taken at once; none where the next step needs an event step, None (nothing taken) where
    the rules take no free in a stretch. ``told``: where the bounds read the full steps' batches, the run's
    offsets of the steps the loop would take in full, this stretch's added."""
    found = swa_free_runs.freeing_stretch(manager, reqs, iteration + done, max_steps - done)
    if found is None:
        return None
    stretch, starts = found
    if not stretch:
        return 0, []
    if told is None:
        freed = swa_free_runs.take_freeing_decodes(manager, reqs, iteration + done, stretch, starts)
        breaks_at = {offset for offset, _ in freed}
        return stretch, step_runs(counted_starts(starts), freed, done, breaks_at, extends_break=True)
    lengths = batch_lengths(reqs, True)
    due_at: list[int] = []
    freed = swa_free_runs.take_freeing_decodes(manager, reqs, iteration + done, stretch, starts, due_at)
    told.update(done + offset for offset in due_at)
    runs = step_runs(counted_starts(starts), freed, done, set(due_at), extends_break=False)
    if SHARED_BATCH_LISTS and batch_module.LAZY_DECODE_BATCH:
        return stretch, _with_shared_batches(runs, reqs, lengths, iteration, done)
    return stretch, [_with_batch(run, reqs, lengths, iteration, done) for run in runs]


def _with_shared_batches(
    runs: list[FullStep], reqs: list[RequestCache], lengths: list[int] | None, iteration: int, done: int
) -> list[FullStep]:
    """``_with_batch`` of each run, the batches sharing the requests' ids and states (``SHARED_BATCH_LISTS``)."""
    ids, states = [req.request_id for req in reqs], [req.state for req in reqs]
    assert lengths is not None, "a stretch whose batches the bounds read has its lengths"
    return [
        FullStep(
            run.offset,
            run.pages,
            DecodeBatch(iteration + run.offset, ids, states, lengths, run.offset - done),
            run.usage,
            run.num_steps,
            run.finished,
            run.swa_freed,
        )
        for run in runs
    ]


def _with_batch(
    run: FullStep, reqs: list[RequestCache], lengths: list[int] | None, iteration: int, done: int
) -> FullStep:
    """The full step with its first step's batch, ``lengths`` those before its stretch (at run offset ``done``)."""
    return run._replace(batch=page_step_batch(reqs, lengths, iteration + run.offset, run.offset - done))


def step_runs(
    page_steps: list[tuple[int, int]],
    freed: list[tuple[int, int]],
    done: int,
    breaks_at: set[int],
    extends_break: bool,
) -> list[FullStep]:
    """``(offset, pages)`` and ``(offset, SWA pages freed)`` of a stretch, both in step order, as full steps from
    ``done`` on: each step at an offset in ``breaks_at`` (every freeing step among them) begins a new one, which
    the next step starting as many pages goes on only where ``extends_break``; the page-starting steps between
    as ``page_step_runs`` makes them. The loop's own stretch breaks at each SWA free and goes on from it; where
    the bounds read the batches, at each free or checkpoint due (the loop's event step), which stands alone."""
    pages_at, freed_at = dict(page_steps), dict(freed)
    runs: list[FullStep] = []
    for offset in sorted(pages_at.keys() | breaks_at):
        pages = pages_at.get(offset, 0)
        if (
            offset not in breaks_at
            and runs
            and (extends_break or runs[-1].offset - done not in breaks_at)
            and _extends(runs[-1], done + offset, pages)
        ):
            runs[-1] = runs[-1]._replace(num_steps=runs[-1].num_steps + 1)
            continue
        runs.append(FullStep(done + offset, pages, None, None, 1, (), freed_at.get(offset, 0)))
    return runs


def join_step_runs(full_steps: list[FullStep], stretch_steps: list[FullStep], told: set[int] | None) -> None:
    """A stretch's full steps after the run's before it; where the bounds read them (``told``: the run's due
    steps), a page run the stretch begins with at the seam goes on the one before (a room cut between two
    freeing stretches)."""
    if told is not None and full_steps and stretch_steps:
        first, last = stretch_steps[0], full_steps[-1]
        if first.offset not in told and last.offset not in told and _extends(last, first.offset, first.pages):
            full_steps[-1] = last._replace(num_steps=last.num_steps + first.num_steps)
            stretch_steps = stretch_steps[1:]
    full_steps += stretch_steps


def _extends(last: FullStep, at: int, pages: int) -> bool:
    """Whether a step at run offset ``at`` starting ``pages`` pages goes on the page run ``last`` (neither due):
    ``last`` moved only pages, as many, up to ``at``."""
    return last.usage is None and pages > 0 and last.pages == pages and last.offset + last.num_steps == at
