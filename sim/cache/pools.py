"""Slot allocators for the three kinds of cache memory.

A pool hands out integer ids: KV pools hand out *pages* (``page_size`` token slots each, slot id =
``page * page_size + offset``, the layout the executor's tensors use), the MAMBA pool hands out state ids.
The pool only knows which ids are free; who holds the others (a running request or a tree node) is
recorded by the holders, and ``check_integrity`` in the manager proves every id has exactly one owner.
"""
from __future__ import annotations

from typing import NamedTuple


class PoolExhausted(RuntimeError):
    """Raised only on a bug: callers must ask ``num_free`` (and evict) before allocating."""


class Pool:
    def __init__(self, name: str, size: int, on_free=None):
        if size < 0:
            raise ValueError(f"{name} pool size must be >= 0, got {size}")
        self.name = name
        self.size = size
        # pop from the end: lowest ids first, so runs are reproducible and easy to read in tests
        self._free = list(range(size - 1, -1, -1))
        self._on_free = on_free  # the executor poisons freed memory through this hook

    def set_on_free(self, hook) -> None:
        """Called with the ids of every free (the executor poisons that memory with NaN)."""
        self._on_free = hook

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.size - len(self._free)

    def alloc(self, count: int) -> list[int]:
        if count > len(self._free):
            raise PoolExhausted(f"{self.name} pool: asked for {count}, {len(self._free)} free of {self.size}")
        if count == 0:
            return []
        ids = self._free[-count:]
        del self._free[-count:]
        ids.reverse()
        return ids

    def alloc_one(self) -> int:
        return self.alloc(1)[0]

    def free(self, ids: list[int]) -> None:
        if not ids:
            return
        if self._on_free is not None:
            self._on_free(ids)
        self._free.extend(reversed(ids))

    def free_ids(self) -> list[int]:
        return list(self._free)


class PoolUsage(NamedTuple):  # a tuple: made for every pool at every engine step, it must be cheap
    """One pool's occupancy at an instant, in its own unit (pages or states)."""

    free: int
    running: int  # held by running requests
    tree: int  # held by the radix tree (evictable unless locked)
