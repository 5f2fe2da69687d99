"""The block pool's per-block entries kept in lists indexed by block id (ids are dense: ``1 .. num_blocks - 1``),
read and written a batch of blocks at a time; and a table's scan for its first null.

Each batch operation has two bodies. Compiled, a loop: mypyc indexes a list by a machine integer, with no
hashing and no boxed key, ~3x faster than a dict's C pass over the same blocks (``isdisjoint``, ``update``).
Pure Python, the C pass over the list (``map`` of its ``__getitem__``, ``__setitem__``), where a loop would run
in the interpreter. ``LOOPS`` picks them (tests/test_vllm_by_id_property.py holds the two to each other).
"""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from operator import is_not, not_
from typing import Any

# True: the loops (the compiled core's); False: the C passes (pure Python's). Either gives the same lists
LOOPS = not __file__.endswith(".py")
# True: ``split_set`` reads each entry once (a loop putting each block in one list, or one C pass read and then
# counted and flagged); False: the reference, ``all_none`` then ``is_set`` and two ``compress``
# (tests/test_vllm_eviction_property.py holds the two equal)
ONE_PASS_SPLIT = True


def all_none(entries: list[Any], blocks: list[int]) -> bool:
    """No block of ``blocks`` has an entry (its entry is None)."""
    if LOOPS:
        for block in blocks:
            if entries[block] is not None:
                return False
        return True
    # counted in C (``count`` answers each None by identity): as fast as ``not any`` over them, and a falsy
    # entry (a test's block key 0) is not taken for None
    return list(map(entries.__getitem__, blocks)).count(None) == len(blocks)


def is_set(entries: list[Any], blocks: list[int]) -> list[bool]:
    """Whether each block of ``blocks`` has an entry (not None), in order."""
    if LOOPS:
        return [entries[block] is not None for block in blocks]
    return list(map(is_not, map(entries.__getitem__, blocks), repeat(None)))


def split_set(entries: list[Any], blocks: list[int]) -> tuple[list[int], list[int]]:
    """The blocks of ``blocks`` with an entry and those without, each in order (``blocks`` itself where none
    has one). A prompt's frees split hundreds of blocks so: the window's retained blocks among the others."""
    if not ONE_PASS_SPLIT:
        if all_none(entries, blocks):
            return [], blocks
        flags = is_set(entries, blocks)
        return list(compress(blocks, flags)), list(compress(blocks, map(not_, flags)))
    if LOOPS:  # the blocks typed ``Any``: each appended as the object it is, no int unboxed and boxed again
        with_entry: list[Any] = []
        without: list[Any] = []
        ids: list[Any] = blocks
        for block in ids:
            if entries[block] is not None:
                with_entry.append(block)
            else:
                without.append(block)
        return with_entry, without
    read_once = list(map(entries.__getitem__, blocks))
    if read_once.count(None) == len(blocks):
        return [], blocks
    flags = list(map(is_not, read_once, repeat(None)))
    return list(compress(blocks, flags)), list(compress(blocks, map(not_, flags)))


def all_equal(entries: list[int], blocks: list[int], value: int) -> bool:
    """Every block of ``blocks`` has ``value``."""
    if LOOPS:
        for block in blocks:
            if entries[block] != value:
                return False
        return True
    return list(map(entries.__getitem__, blocks)).count(value) == len(blocks)


def read(entries: list[Any], blocks: list[int]) -> list[Any]:
    """The entries of ``blocks``, in order."""
    if LOOPS:
        return [entries[block] for block in blocks]
    return list(map(entries.__getitem__, blocks))


def write(entries: list[Any], blocks: list[int], values: list[Any]) -> None:
    """``entries[block] = value`` for each block with its value, in order."""
    if LOOPS:
        for block, value in zip(blocks, values, strict=True):
            entries[block] = value
        return
    deque(map(entries.__setitem__, blocks, values), 0)  # consumed in C


def fill(entries: list[Any], blocks: list[int], value: Any) -> None:
    """``entries[block] = value`` for each of ``blocks``."""
    if LOOPS:
        for block in blocks:
            entries[block] = value
        return
    deque(map(entries.__setitem__, blocks, repeat(value)), 0)


def take(entries: list[Any], blocks: list[int], value: Any) -> list[Any]:
    """The entries of ``blocks``, in order, each then set to ``value``."""
    taken = read(entries, blocks)
    fill(entries, blocks, value)
    return taken


def first_none(items: list[Any]) -> int:
    """Where the first None of ``items`` is (a table's first null; ``len(items)``: none)."""
    if LOOPS:
        for index, item in enumerate(items):
            if item is None:
                return index
        return len(items)
    return items.index(None) if None in items else len(items)  # a C scan, comparing each id with None


def has_none(items: list[Any]) -> bool:
    """``None in items`` (a table's stretch holds a null)."""
    if LOOPS:
        for item in items:
            if item is None:
                return True
        return False
    return None in items
