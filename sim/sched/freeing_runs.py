"""A batch-run loop's freeing stretch (``sim/cache/swa_free_runs.py``) taken, and its full steps: each step that
starts pages or frees SWA, consecutive ones starting the same pages and freeing none after the first as one
(``FullStep.num_steps``), as ``page_step_runs`` makes them for a quiet stretch."""

from __future__ import annotations

from sim.cache import swa_free_runs
from sim.cache.manager import CacheManager
from sim.cache.plain_decodes import counted_starts
from sim.cache.request import RequestCache
from sim.sched.batch import FullStep


def take_freeing_stretch(
    manager: CacheManager, reqs: list[RequestCache], iteration: int, done: int, max_steps: int
) -> tuple[int, list[FullStep]] | None:
    """The decode steps from ``iteration + done`` on up to the next checkpoint or the room's end, their SWA
    frees included, taken at once; none where the next step needs an event step, None (nothing taken) where
    the rules take no free in a stretch."""
    found = swa_free_runs.freeing_stretch(manager, reqs, iteration + done, max_steps - done)
    if found is None:
        return None
    stretch, starts = found
    if not stretch:
        return 0, []
    freed = swa_free_runs.take_freeing_decodes(manager, reqs, iteration + done, stretch, starts)
    return stretch, freeing_step_runs(counted_starts(starts), freed, done)


def freeing_step_runs(
    page_steps: list[tuple[int, int]], freed: list[tuple[int, int]], done: int
) -> list[FullStep]:
    """``(offset, pages)`` and ``(offset, SWA pages freed)`` of a stretch, both in step order, as full steps from
    ``done`` on: a step freeing SWA begins a new one."""
    pages_at, freed_at = dict(page_steps), dict(freed)
    runs: list[FullStep] = []
    for offset in sorted(pages_at.keys() | freed_at.keys()):
        pages, swa_freed = pages_at.get(offset, 0), freed_at.get(offset, 0)
        last = runs[-1] if runs else None
        if pages and not swa_freed and last is not None and last.pages == pages:
            if last.offset + last.num_steps == done + offset:
                runs[-1] = last._replace(num_steps=last.num_steps + 1)
                continue
        runs.append(FullStep(done + offset, pages, None, None, 1, (), swa_freed))
    return runs
