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
# True: a request's page lists get room for the rest of its prompt as they grow (``make_room``); False: CPython's
# own growth, the reference (tests/test_list_room_property.py holds the lists equal either way)
ROOM_FOR_PROMPT = True
MAX_SHARED_LEN = 1 << 14  # a longer run is made each time (a chunk's pages are fewer)
MAX_KEPT_ITEMS = 1 << 22  # per item: at most ~32 MB of kept tuples, however many lengths a run asks for
MIN_ROOM_LEN = 64  # a shorter list is given no room: its copies are a few cache lines


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


# ``list.extend`` itself: compiled, ``items.extend(...)`` is a slice assignment, which reads no length hint
_extend = list.extend


class _Room:
    """No items, said to be ``count``: ``list.extend`` of it first sizes the list for ``count`` more, then, given
    none, cuts back through ``list_resize``, which leaves an allocation at most half unused where it is."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self) -> _Room:
        return self

    def __next__(self) -> Any:
        raise StopIteration

    def __length_hint__(self) -> int:
        return self.count


def make_room(items: list[Any], num_more: int) -> int:
    """Room in ``items`` for up to ``num_more`` more without a copy, as much as CPython keeps (a little under
    its length; none under ``MIN_ROOM_LEN``): a list grown a chunk at a time by ``+=`` is otherwise copied whole
    at nearly every chunk (its spare room is an eighth). The items are unchanged; returns the room asked for."""
    room = min(num_more, len(items) - 4)
    if not ROOM_FOR_PROMPT or room <= 0 or len(items) < MIN_ROOM_LEN:
        return 0
    _extend(items, _Room(room))
    return room
