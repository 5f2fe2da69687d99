"""Slot allocators for the three kinds of cache memory.

A pool hands out integer ids: KV pools hand out *pages* (``page_size`` token slots each, slot id =
``page * page_size + offset``, the layout the executor's tensors use), the MAMBA pool hands out state ids.
The pool only knows which ids are free; who holds the others (a running request or a tree node) is
recorded by the holders, and ``check_integrity`` in the manager proves every id has exactly one owner.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.cache.components import Component
from sim.cache.errors import PoolExhausted
from sim.cache.events import EventBus, SlotsFreed, emit


class Pool:
    """Free ids are the ones handed back (reused last-freed first) and, above a high-water mark, the ones
    never handed out yet (lowest first): a pool of a billion states costs nothing until it is used."""

    def __init__(
        self, name: str, size: int, component: Component = Component.FULL, events: EventBus | None = None
    ):
        if size < 0:
            raise ValueError(f"{name} pool size must be >= 0, got {size}")
        self.name, self.size, self.component = name, size, component
        # every free is announced (SlotsFreed): the executor poisons that memory with NaN
        self._freed = (events or EventBus()).channel(SlotsFreed)
        self.high_water = 0  # ids below it have been handed out at least once
        self._returned: list[int] = []  # a stack: the last id freed is the next one handed out
        # kept, not derived: asked several times per simulated step (check_integrity recounts it)
        self.num_free = size

    @property
    def num_used(self) -> int:
        return self.size - self.num_free

    def alloc(self, count: int) -> list[int]:
        returned = self._returned
        if count <= len(returned):  # the usual case: ids freed before
            if count == 0:
                return []
            ids = returned[-count:]
            del returned[-count:]
            ids.reverse()
            self.num_free -= count
            return ids
        if count > self.num_free:
            raise PoolExhausted(f"{self.name} pool: asked for {count}, {self.num_free} free of {self.size}")
        ids = returned[::-1]
        returned.clear()
        fresh = count - len(ids)
        ids += range(self.high_water, self.high_water + fresh)
        self.high_water += fresh
        self.num_free -= count
        return ids

    def alloc_one(self) -> int:
        return self.alloc(1)[0]

    def free(self, ids: list[int]) -> None:
        if not ids:
            return
        if self._freed:
            emit(self._freed, SlotsFreed(self.component, ids))
        self._returned.extend(reversed(ids))
        self.num_free += len(ids)

    def returned_ids(self) -> list[int]:
        """The free ids below the high-water mark (every id at or above it is free too)."""
        return list(self._returned)


class PoolUsage(NamedTuple):  # a tuple: made for every pool at every engine step, it must be cheap
    """One pool's occupancy at an instant, in its own unit (pages or states)."""

    free: int
    running: int  # held by running requests
    tree: int  # held by the radix tree (evictable unless locked)
