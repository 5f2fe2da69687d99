"""A page list that is only a count, for anonymous pools.

On anonymous pools (``Pool.make_anonymous``) every page id is ``ANONYMOUS_ID``, and a request's SWA list holds
None where its SWA was freed, always a prefix (``check_integrity``). So such a list is two numbers: its length
and how many of its first entries are None. At page 1 the lists are one entry per token, and making, extending,
slicing and dropping them was ~25% of a `marconi` replay (docs/results/presets-speed.md, Round 23): here each of
those is a few integer operations. ``CountedPages`` reads like the list it stands for (``len``, indexing,
slices, iteration, ``+=``, ``del`` and None fills of a slice, ``==``), so the code that moves, cuts and frees
page lists takes it unchanged. Compiled, it is a native class, and every module that a counted list reaches
types it ``PageList`` (a list or counted: its ops are the object protocol's, one C call each); FreeToken's
trees, which own their lists and never get a counted one, narrow them to ``list[int]`` where they take them
(``request.COUNTED_PAGES``; docs/results/presets-speed.md, Round 27).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import Any, overload

# True: anonymous ids added to counted lists move their two counts (``count_in``); False: fresh lists of the ids,
# which ``CountedPages.__iadd__`` reads back to the same counts (the reference; tests/test_count_in_property.py)
COUNT_IN = True

# The one id an anonymous pool hands out (``Pool.make_anonymous``; ``pools`` takes it from here, so that pools,
# nodes and events can type their lists ``PageList``): no real id is negative
ANONYMOUS_ID = -1


class CountedPages:
    """``[None] * num_none + [ANONYMOUS_ID] * (length - num_none)``, held as the two counts."""

    __slots__ = ("length", "num_none")

    def __init__(self, length: int, num_none: int = 0) -> None:
        self.length, self.num_none = length, num_none

    def __len__(self) -> int:
        return self.length

    def __bool__(self) -> bool:
        return self.length > 0

    def __iter__(self) -> Iterator[int | None]:
        yield from repeat(None, self.num_none)
        yield from repeat(ANONYMOUS_ID, self.length - self.num_none)

    @overload
    def __getitem__(self, index: int) -> int | None: ...
    @overload
    def __getitem__(self, index: slice) -> CountedPages: ...
    def __getitem__(self, index: int | slice) -> int | None | CountedPages:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.length)
            assert step == 1, "page lists are cut, never strided"
            stop = max(start, stop)
            return CountedPages(stop - start, min(max(self.num_none - start, 0), stop - start))
        if index < 0:
            index += self.length
        if not 0 <= index < self.length:
            raise IndexError("page index out of range")
        return None if index < self.num_none else ANONYMOUS_ID

    def __delitem__(self, index: slice) -> None:
        start, stop, step = index.indices(self.length)
        assert step == 1, "page lists are cut, never strided"
        stop = max(start, stop)
        # a None entry after the cut is one before it too: the None entries stay a prefix
        self.num_none = min(self.num_none, start) + max(self.num_none - stop, 0)
        self.length -= stop - start

    def __setitem__(self, index: slice, values: Any) -> None:
        """Only a run of None over the live entries just past the freed ones (a request's SWA freed)."""
        start, stop, step = index.indices(self.length)
        assert step == 1 and len(values) == stop - start and start <= self.num_none
        assert all(value is None for value in values[:1]) and (not values or values[-1] is None)
        self.num_none = max(self.num_none, stop)

    def __iadd__(self, more: Any) -> CountedPages:
        num_none = more.num_none if isinstance(more, CountedPages) else _leading_nones(more)
        assert num_none == 0 or self.num_none == self.length, "the None entries stay a prefix"
        self.num_none += num_none
        self.length += len(more)
        return self

    def __add__(self, more: Any) -> list[int | None]:
        return list(self) + list(more)

    def __radd__(self, before: Any) -> list[int | None]:
        return list(before) + list(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CountedPages):
            return (self.length, self.num_none) == (other.length, other.num_none)
        return isinstance(other, list | tuple) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"CountedPages({self.length}, {self.num_none})"


def count_in(full: Any, swa: Any, num_pages: int, has_swa: bool) -> bool:
    """``full += [ANONYMOUS_ID] * num_pages`` and ``swa +=`` as many ids (None each where the model has no SWA)
    as the counts ``__iadd__`` would read back from those lists, where both are counted and hold pages; False
    (nothing moved) elsewhere: real lists, an empty one (``add_own_pages`` takes the new lists instead), or SWA
    Nones added after live entries (``__iadd__``'s assertion keeps its say). At page 1 a timed run's batch
    steps add a page a request a step: ~57,000 such adds at 4,000 requests of ``marconi-sglang``."""
    if not COUNT_IN or not full or not isinstance(full, CountedPages) or not isinstance(swa, CountedPages):
        return False
    if not has_swa:
        if swa.num_none != swa.length:
            return False
        swa.num_none += num_pages
    full.length += num_pages
    swa.length += num_pages
    return True


def _leading_nones(items: Any) -> int:
    """How many of ``items``' first entries are None (ids or None, the None entries a prefix)."""
    if not items or items[0] is not None:
        return 0
    if items[-1] is None:
        return len(items)
    return next(i for i, item in enumerate(items) if item is not None)


# a page list as the modules type it: a real list, or counted (anonymous pools, ``request.COUNTED_PAGES``);
# compiled, ``CountedPages`` is a native class, and every op on either is one call
PageList = list[Any] | CountedPages  # FULL or SWA ids (a request's SWA: None where freed, a prefix)
