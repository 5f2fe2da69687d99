"""A freeing stretch's page starts handed out lean (``swa_free_runs.LEAN_HAND_OUT``).

``_allocate_before`` hands the starts before each turn out through ``hand_out_starts``: at 4,000 requests of
``no-cache`` timed, 11,232 hand-outs of 16,571 starts in 3,103 stretches, two pool calls, a list a request and two
zips each. Nothing in a stretch touches the FULL pool but its page starts (a free gives back SWA pages, a folded
checkpoint takes its request's spare slot), and a pool hands out ``n`` ids at once as it would one by one, so the
stretch's FULL ids are counted out in one call; the SWA ids are still taken turn by turn, after the frees before
them. Each request gets its pages, FULL and SWA, in the same order and at the same turn as before.
"""

from __future__ import annotations

from bisect import bisect_left

from sim.cache.components import FULL, SWA
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache


def full_ids_of(manager: CacheManager, starts: list[tuple[int, int]]) -> list[int]:
    """The FULL ids of a stretch's page starts, in their order, as the hand-outs one by one would take them."""
    return manager.pools[FULL].alloc(len(starts)) if starts else []


def hand_out_before(
    manager: CacheManager,
    reqs: list[RequestCache],
    starts: list[tuple[int, int]],
    full_ids: list[int],
    allocated: int,
    before: tuple[int, int],
) -> int:
    """``_allocate_before`` where a start comes before ``before`` (the end found by bisection: the starts are
    sorted), its FULL ids read from ``full_ids``; returns how many starts are handed out now."""
    end = bisect_left(starts, before, allocated)
    count = end - allocated
    swa_ids = manager.pools[SWA].alloc(count) if manager.has_swa else [None] * count
    if count == 1:  # the usual case: one start, one request
        reqs[starts[allocated][1]].add_own_pages([full_ids[allocated]], [swa_ids[0]])
        return end
    own: dict[int, tuple[list[int], list[int | None]]] = {}
    for at in range(allocated, end):
        full, swa = own.setdefault(starts[at][1], ([], []))
        full.append(full_ids[at])
        swa.append(swa_ids[at - allocated])
    for index, (full, swa) in own.items():
        reqs[index].add_own_pages(full, swa)
    return end
