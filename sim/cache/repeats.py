"""Runs of one repeated item, kept as tuples, for the per-token page lists of anonymous pools.

At page 1 a request's own page lists grow by a chunk's pages at a time, and on anonymous pools every id is
``ANONYMOUS_ID`` and every freed SWA entry ``None``. Building a fresh list for each extend (or each None fill)
costs a pass to make it and a pass to drop it (a decref per item, every one on the same object), besides the
copy into the request's list. ``list.extend`` and slice assignment read a tuple in place, so a tuple kept per
length leaves only that copy. Switch ``SHARED_RUNS`` off: a fresh list each time, the reference
(tests/test_repeats_property.py holds the runs equal either way).
"""

from __future__ import annotations

from typing import Any

from sim.cache.pools import ANONYMOUS_ID

# True: the run of a length is a tuple made once and kept; False: a fresh list per call (the reference)
SHARED_RUNS = True
MAX_SHARED_LEN = 1 << 14  # a longer run is made each time (a chunk's pages are fewer)
MAX_KEPT_ITEMS = 1 << 22  # per item: at most ~32 MB of kept tuples, however many lengths a run asks for


class KeptRuns:
    """The runs of one item, a tuple per length, kept until ``MAX_KEPT_ITEMS`` items are held."""

    def __init__(self, item: Any) -> None:
        self.item = item
        self.runs: dict[int, tuple[Any, ...]] = {}
        self.num_kept_items = 0

    def of(self, count: int) -> tuple[Any, ...] | list[Any]:
        if not SHARED_RUNS or count > MAX_SHARED_LEN:
            return [self.item] * count
        run = self.runs.get(count)
        if run is None:
            run = (self.item,) * count
            if self.num_kept_items + count <= MAX_KEPT_ITEMS:
                self.runs[count] = run
                self.num_kept_items += count
        return run


ANONYMOUS_RUNS = KeptRuns(ANONYMOUS_ID)
NONE_RUNS = KeptRuns(None)


def anonymous_ids(count: int) -> tuple[int, ...] | list[int]:
    """``count`` times ``ANONYMOUS_ID``, to extend a list with (not to keep: it may be shared)."""
    return ANONYMOUS_RUNS.of(count)


def nones(count: int) -> tuple[None, ...] | list[None]:
    """``count`` times ``None``, to extend a list with or assign to a slice (not to keep: it may be shared)."""
    return NONE_RUNS.of(count)
