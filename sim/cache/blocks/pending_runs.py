"""A prefill step's new blocks listed late: one entry a step, put in the map only when a lookup needs them
(``PENDING_RUNS``).

A ``vllm`` replay at 4,000 lists ~1.29 M hashed blocks, each a dict insert of a 192-bit key, and unlists ~1.16 M
at their eviction, a dict delete each: a sixth of a compiled replay. About 60% of them are evicted before any
lookup asks for a key of their run (a hit's search, the admission's table): for those both the insert and the
delete are wasted. So ``cache_group`` keeps a step's blocks of a group as one ``Pending`` entry, named in its
group's ``pending`` under each digest its keys carry (a key is ``digest << 64 | end``: one or two digests a
step), and each block's ``run_at`` names the entry. An eviction of a pending block only forgets it there; a
lookup that misses a key whose digest has pending entries first lists that digest's pending blocks (``flush``),
oldest entry first, each in its order, then looks again. A key's blocks are listed in the order they were
hashed, as the reference lists them: every entry of a digest is newer than its listed blocks (a listing one
block at a time flushes the digest first), so a key's oldest block is the listed one if any, else the oldest
pending one, which the flush lists first. Off (or with the reference's bytes keys): every block listed when
hashed, the reference (``tests/test_vllm_pending_runs_property.py`` holds the two alike).
"""

from __future__ import annotations

from collections import Counter, deque
from itertools import compress, groupby, repeat
from operator import is_, is_not, rshift
from typing import Any

from sim.cache.blocks import by_id

PENDING_RUNS = True
DIGEST_SHIFT = 64  # a key is ``digest << 64 | end`` (``keys.block_key``)


class Pending:
    """A run of one ``cache_group`` call's blocks of ``group`` whose keys carry one ``digest``, in order, not
    listed yet (``live``: how many are still pending)."""

    __slots__ = ("blocks", "digest", "group", "live")

    def __init__(self, blocks: list[int], digest: int, group: int) -> None:
        self.blocks = blocks
        self.digest = digest
        self.group = group
        self.live = len(blocks)


def digest_runs(keys: list[Any]) -> list[tuple[int, int]]:
    """Each run of consecutive keys carrying one digest: (digest, its length), in order (one to a few a
    prefill step)."""
    if not by_id.LOOPS:
        return [(digest, len(list(run))) for digest, run in groupby(map(rshift, keys, repeat(DIGEST_SHIFT)))]
    runs: list[tuple[int, int]] = []
    last, length = -1, 0
    for key in keys:
        digest: int = key >> DIGEST_SHIFT
        if digest != last and length:
            runs.append((last, length))
            length = 0
        last, length = digest, length + 1
    if length:
        runs.append((last, length))
    return runs


def kept_pending(pool: Any, blocks: list[int], keys: list[Any], group: int) -> bool:
    """``cache_group``'s blocks, if none is hashed yet, keyed and kept as pending runs (True); else (False) the
    pending blocks of their keys' digests listed, for the reference to list them after. Keys of the reference's
    bytes (tests build them whatever ``keys.INT_KEYS`` says) are listed by the reference."""
    if keys and not isinstance(keys[0], int):
        return False
    if not by_id.all_none(pool.key_at, blocks):
        flush(pool, keys, group)
        return False
    pool.key_blocks(blocks, keys, group)
    named: dict[int, list[Pending]] = pool.pending[group]
    start = 0
    for digest, length in digest_runs(keys):
        entry = Pending(blocks[start : start + length], digest, group)
        by_id.fill(pool.run_at, entry.blocks, entry)
        if digest in named:
            named[digest].append(entry)
        else:
            named[digest] = [entry]
        start += length
    return True


def gone(pool: Any, entry: Pending, count: int) -> None:
    """``count`` of ``entry``'s blocks left it (evicted, or listed); the last takes it out of ``pending``."""
    entry.live -= count
    if entry.live == 0:
        named: dict[int, list[Pending]] = pool.pending[entry.group]
        entries = named.get(entry.digest)
        if entries is not None and _drop(entries, entry) and not entries:
            del named[entry.digest]


def _drop(entries: list[Pending], entry: Pending) -> bool:
    """``entry`` taken out of ``entries`` (by identity), if there (a flushed digest's entries are not)."""
    for index in range(len(entries)):
        if entries[index] is entry:
            del entries[index]
            return True
    return False


def flush_key(pool: Any, key: Any, group: int) -> bool:
    """The pending blocks of ``key``'s digest listed (see the module's docstring); True if it had any entry."""
    named: dict[int, list[Pending]] = pool.pending[group]
    if not named:  # (nothing pending: a key of the reference's bytes never is)
        return False
    digest: int = key >> DIGEST_SHIFT
    if digest not in named:
        return False
    for entry in named.pop(digest):
        _flush_entry(pool, entry)
    return True


def flush(pool: Any, keys: list[Any], group: int) -> bool:
    """``flush_key`` of each digest of ``keys``; True if any had an entry."""
    if not pool.pending[group]:
        return False
    found = False
    for digest, _ in digest_runs(keys):
        found = flush_key(pool, digest << DIGEST_SHIFT, group) or found
    return found


def flush_missed(pool: Any, keys: list[Any], blocks: list[int | None], group: int) -> bool:
    """``flush`` of the keys a lookup found no block for (``blocks``: what it found)."""
    return flush(pool, [key for key, block in zip(keys, blocks, strict=True) if block is None], group)


def flush_all(pool: Any) -> None:
    """Every pending block listed (for tests and integrity checks, which read the whole map)."""
    for group, named in enumerate(pool.pending):
        for digest in list(named):
            flush_key(pool, digest << DIGEST_SHIFT, group)


def _flush_entry(pool: Any, entry: Pending) -> None:
    """``entry``'s blocks still pending in it listed, in order (older entries listed first)."""
    run_at: list[Pending | None] = pool.run_at
    key_at: list[Any] = pool.key_at
    if by_id.LOOPS:
        for block in entry.blocks:
            if run_at[block] is entry:
                run_at[block] = None
                pool.list_block_now(block, key_at[block], entry.group)
        entry.live = 0
        return
    blocks = entry.blocks  # pure Python: C passes over the entry
    if entry.live < len(blocks):
        blocks = list(compress(blocks, map(is_, map(run_at.__getitem__, blocks), repeat(entry))))
    by_id.fill(run_at, blocks, None)
    entry.live = 0
    _list_new(pool, blocks, list(map(key_at.__getitem__, blocks)), entry.group)


def _list_new(pool: Any, blocks: list[int], keys: list[Any], group: int) -> None:
    """``list_block_now`` of each block with its key, in order (pure Python: in one update where every key is
    new to the map and in ``keys`` once)."""
    first_of = pool.first_in[group]
    if first_of.keys().isdisjoint(keys):
        num_keys = len(first_of)
        first_of.update(zip(keys, blocks, strict=True))
        if len(first_of) - num_keys == len(blocks):
            return
        deque(map(first_of.pop, dict.fromkeys(keys)), 0)  # a key twice: the map as it was
    for block, key in zip(blocks, keys, strict=True):
        pool.list_block_now(block, key, group)


def unlisted_late(
    pool: Any, blocks: list[int], keys: list[Any], groups: list[int]
) -> tuple[list[int], list[Any], list[int]]:
    """Evicted blocks still pending forgotten there; the others (their keys and groups) returned, in order,
    for the map to unlist."""
    entries = by_id.read(pool.run_at, blocks)
    num_listed = entries.count(None)
    if num_listed == len(entries):
        return blocks, keys, groups
    pending = list(map(is_not, entries, repeat(None)))
    by_id.fill(pool.run_at, list(compress(blocks, pending)), None)
    for entry, count in Counter(compress(entries, pending)).items():
        gone(pool, entry, count)
    if not num_listed:
        return [], [], []
    listed = list(map(is_, entries, repeat(None)))
    return list(compress(blocks, listed)), list(compress(keys, listed)), list(compress(groups, listed))
