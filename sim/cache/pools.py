"""Slot allocators for the three kinds of cache memory.

A pool hands out integer ids: KV pools hand out *pages* (``page_size`` token slots each, slot id =
``page * page_size + offset``, the layout the executor's tensors use), the MAMBA pool hands out state ids.
The pool only knows which ids are free; who holds the others (a running request or a tree node) is
recorded by the holders, and ``check_integrity`` in the manager proves every id has exactly one owner.
"""

from __future__ import annotations

from typing import NamedTuple, cast

from sim.cache.components import Component
from sim.cache.counted_pages import ANONYMOUS_ID, PageList
from sim.cache.errors import PoolExhausted
from sim.cache.events import EventBus, SlotsFreed, emit
from sim.cache.tuple_new import new_tuple


class Pool:
    """Free ids are the ones handed back (reused last-freed first) and, above a high-water mark, the ones
    never handed out yet (lowest first): a pool of a billion states costs nothing until it is used.

    The ids handed back are kept as the lists they came in, newest last, each from its first id not yet
    handed out again: ``alloc`` takes the newest list's ids in their order, then the next newest's, the order
    a stack of every freed id (each list pushed in reverse) would pop them. At page 1 a request's pages are a
    list per token, and pushing each freed id onto one stack was a sixth of a Marconi run. ``free`` takes its
    list: no caller changes a list after freeing it, and the pool never changes or hands out a kept list."""

    def __init__(
        self, name: str, size: int, component: Component = Component.FULL, events: EventBus | None = None
    ):
        if size < 0:
            raise ValueError(f"{name} pool size must be >= 0, got {size}")
        self.name, self.size, self.component = name, size, component
        # every free is announced (SlotsFreed): the executor poisons that memory with NaN
        self._freed = (events or EventBus()).channel(SlotsFreed)
        self.high_water = 0  # ids below it have been handed out at least once
        self._lists: list[list[int]] = []  # the freed lists, newest last
        self._firsts: list[int] = []  # per list, its first id not handed out again
        self._num_returned = 0  # ids in those lists not handed out again
        # kept, not derived: asked several times per simulated step (check_integrity recounts it)
        self.num_free = size
        self.anonymous = False  # see ``make_anonymous``

    def make_anonymous(self) -> None:
        """From now on every id handed out is ``ANONYMOUS_ID`` and a free only counts: for a cache nobody reads
        an id of (Marconi's tuner replays its window on 21 throwaway caches, reading only their hits). Which
        ids a holder has never steers a rule (they are only moved, counted and freed), so such a cache makes
        the same decisions, while a page-1 list of one shared int costs a fraction of one of distinct ints to
        build, copy and drop (tests/test_anonymous_pages.py). Only an empty pool may switch, and its ids can no
        longer be checked (``check_integrity``)."""
        assert self.num_free == self.size, f"{self.name} pool: only an empty pool turns anonymous"
        self.anonymous = True

    def copy_free_ids(self, other: Pool) -> None:
        """Take ``other``'s free ids as they stand (a copy of a cache: Marconi's tuner forks its replays). The
        kept lists are shared: neither pool ever changes one."""
        assert self.size == other.size and self.anonymous == other.anonymous and not self._lists
        self.high_water, self.num_free, self._num_returned = (
            other.high_water,
            other.num_free,
            other._num_returned,
        )
        self._lists, self._firsts = list(other._lists), list(other._firsts)

    @property
    def num_used(self) -> int:
        return self.size - self.num_free

    def alloc(self, count: int) -> list[int]:
        if self.anonymous:
            return self._alloc_anonymous(count)
        if count <= self._num_returned:  # the usual case: ids freed before
            if count == 0:
                return []
            ids = self._take(count)
        else:
            if count > self.num_free:
                raise PoolExhausted(
                    f"{self.name} pool: asked for {count}, {self.num_free} free of {self.size}"
                )
            ids = self._take(self._num_returned) if self._num_returned else []
            fresh = count - len(ids)
            if ids:
                ids += _id_objects(self.high_water, fresh)
            else:  # a fresh pool: the slice itself
                ids = _id_objects(self.high_water, fresh)
            self.high_water += fresh
        self.num_free -= count
        return ids

    def _alloc_anonymous(self, count: int) -> list[int]:
        self._count_out(count)
        return [ANONYMOUS_ID] * count

    def count_out(self, count: int) -> None:
        """An anonymous pool's ``alloc`` without its list of ids (each would be ``ANONYMOUS_ID``): the lockstep
        take's (``plain_decodes.take_lockstep_run``), an allocation of its own (tests/anonymous_runs.py logs it)."""
        assert self.anonymous, f"{self.name} pool: only an anonymous pool counts its ids out"
        self._count_out(count)

    def _count_out(self, count: int) -> None:
        if count > self.num_free:
            raise PoolExhausted(f"{self.name} pool: asked for {count}, {self.num_free} free of {self.size}")
        self.num_free -= count

    def _take(self, count: int) -> list[int]:
        """The next ``count`` freed ids (no more than there are), newest list first, each from its first."""
        lists, firsts = self._lists, self._firsts
        self._num_returned -= count
        ids: list[int] = []
        while count:
            held, first = lists[-1], firsts[-1]
            end = min(first + count, len(held))
            part = held[first:end]
            if ids:
                ids += part
            else:
                ids = part
            count -= end - first
            if end == len(held):
                lists.pop()
                firsts.pop()
            elif end > len(held) - end:  # more handed out than left: keep a copy of the rest (memory)
                lists[-1], firsts[-1] = held[end:], 0
            else:
                firsts[-1] = end
        return ids

    def alloc_one(self) -> int:
        return self.alloc(1)[0]

    def free(self, ids: PageList) -> None:
        """Take ``ids`` back; the list is kept as it is (the caller no longer changes it)."""
        if not ids:
            return
        if self._freed:
            emit(self._freed, SlotsFreed(self.component, ids))
        if self.anonymous:  # the ids are all one: nothing to keep
            self.num_free += len(ids)
            return
        self._lists.append(cast("list[int]", ids))  # a pool with ids never hands out counted lists
        self._firsts.append(0)
        self._num_returned += len(ids)
        self.num_free += len(ids)

    @property
    def counts_frees(self) -> bool:
        """Whether a free only moves the count: an anonymous pool nobody watches the frees of (``SlotsFreed``)."""
        return self.anonymous and not self._freed

    def free_count(self, count: int) -> None:
        """``free`` of ``count`` ids, for a pool that ``counts_frees``: whoever frees need not list them."""
        assert self.counts_frees
        self.num_free += count

    def returned_ids(self) -> list[int]:
        """The free ids below the high-water mark (every id at or above it is free too), in the order of a
        stack of them: the next to be handed out last."""
        stack: list[int] = []
        for held, first in zip(self._lists, self._firsts, strict=True):
            stack += held[first:][::-1]
        return stack


# Every id's int, made once and shared by all pools: a fresh pool would otherwise make (and later free) an int
# per id it hands out for the first time, at page 1 a token's worth each; Marconi's tuner replays its window on
# 21 fresh caches. Held up to the highest id any pool has handed out, as the pools hold them anyway.
_ID_OBJECTS: list[int] = []


def _id_objects(first: int, count: int) -> list[int]:
    """The ids ``first, first + 1, ..`` (``count`` of them), as the shared ints."""
    end = first + count
    if end > len(_ID_OBJECTS):
        _ID_OBJECTS.extend(range(len(_ID_OBJECTS), end))
    return _ID_OBJECTS[first:end]


class PoolUsage(NamedTuple):  # a tuple: made for every pool at every engine step, it must be cheap
    """One pool's occupancy at an instant, in its own unit (pages or states)."""

    free: int
    running: int  # held by running requests
    tree: int  # held by the radix tree (evictable unless locked)


def new_pool_usage(free: int, running: int, tree: int) -> PoolUsage:
    """``PoolUsage(free, running, tree)``, built natively when compiled (``sim/cache/tuple_new.py``)."""
    return new_tuple(PoolUsage, (free, running, tree))
