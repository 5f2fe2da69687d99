"""What a vLLM block pool keyed by runs of blocks would have to do on a trace: ``vllm`` through ``simulate``
with the pool's operations counted by record, where a record is a stretch of one group's blocks with
consecutive keys of one digest run (``sim/cache/blocks/keys.py``: a key is its token run's digest, then the
block's end in that run), and the splits vLLM's own orders force on such records.

The free queue's tail is shadowed as a linked list of block ids, so that a hit taking a block from a record's
middle and an allocation's evictions ending inside a record are seen. Counted per operation: blocks and
records (caching, freeing to the tail, a hit's blocks, evictions), and the splits: evictions ending inside a
record, hits stopping where the run goes on in the map, a hit taking a block from inside a tail record, and
frees leaving some of a run held by another request. Pure Python only (the compiled core's classes cannot
be wrapped); the counts are deterministic.

    python benchmarks/vllm_run_records.py --limit 1000            # replay, bounds off
    python benchmarks/vllm_run_records.py --limit 1000 --mode timed
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.cache.blocks import steps  # noqa: E402
from sim.cache.blocks.cache_map import CacheMap  # noqa: E402
from sim.cache.blocks.pool import BlockPool  # noqa: E402
from sim.cache.blocks.tail import FreeTail  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

Ident = tuple[int, int, int]  # a hashed block's digest (its key past the end), group and end in its token run


class RecordCounts:
    """Each hashed block's identity, the shadow tail and the counts."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.ident: dict[int, Ident] = {}
        self.block_tokens: dict[int, int] = {}  # a group's tokens a block
        self.group_kinds: tuple[str, ...] = ()
        self.after: dict[int, int | None] = {}  # the shadow tail: each block's newer neighbour
        self.before: dict[int, int | None] = {}
        self.oldest: int | None = None
        self.newest: int | None = None

    def learn(self, block: int, key: Any) -> None:
        digest, end = divmod(key[0], 1 << 64)  # an int key: digest << 64 | end (keys.py)
        self.ident[block] = (digest, key[1], end)

    def next_to(self, a: int | None, b: int | None) -> bool:
        """``a`` and ``b`` are neighbours in one record (either order)."""
        if a is None or b is None or a not in self.ident or b not in self.ident:
            return False
        (digest_a, group_a, end_a), (digest_b, group_b, end_b) = self.ident[a], self.ident[b]
        return (digest_a, group_a) == (digest_b, group_b) and abs(end_a - end_b) == self.block_tokens[group_a]

    def num_records(self, blocks: list[int]) -> int:
        return len(blocks) - sum(map(self.next_to, blocks, blocks[1:]))

    def count(self, op: str, blocks: list[int]) -> None:
        self.counts[f"{op} blocks"] += len(blocks)
        self.counts[f"{op} records"] += self.num_records(blocks)

    def link(self, block: int) -> None:
        self.before[block], self.after[block] = self.newest, None
        if self.newest is None:
            self.oldest = block
        else:
            self.after[self.newest] = block
        self.newest = block

    def unlink(self, block: int) -> tuple[int | None, int | None]:
        older, newer = self.before.pop(block), self.after.pop(block)
        if older is None:
            self.oldest = newer
        else:
            self.after[older] = newer
        if newer is None:
            self.newest = older
        else:
            self.before[newer] = older
        return older, newer


def wrap(cls: type, name: str, before: Any = None, after: Any = None) -> None:
    """``cls.name`` calls ``before(self, *args)`` first and ``after(self, result, *args)`` last."""
    original = getattr(cls, name)

    def wrapped(self, *args):
        if before is not None:
            before(self, *args)
        result = original(self, *args)
        if after is not None:
            after(self, result, *args)
        return result

    setattr(cls, name, wrapped)


def install(rc: RecordCounts) -> None:
    """Wrap the pure-Python pool's operations to count into ``rc``."""
    c = rc.counts

    def cached(pool: CacheMap, blocks: list[int], keys: list) -> None:
        new = [(block, key) for block, key in zip(blocks, keys, strict=True) if pool.key_at[block] is None]
        for block, key in new:
            rc.learn(block, key)
        rc.count("cache", [block for block, _ in new])

    def cached_one(pool: CacheMap, block: int, key: Any) -> None:
        if pool.key_at[block] is None:
            rc.learn(block, key)
            rc.count("cache", [block])

    def freed(tail: FreeTail, blocks: list[int]) -> None:
        rc.count("free", blocks)
        if blocks and blocks[0] in rc.ident:
            rc.count(f"free {rc.group_kinds[rc.ident[blocks[0]][1]]}", blocks)
        for block in blocks:
            rc.link(block)

    def taken(tail: FreeTail, blocks: list[int]) -> None:
        rc.count("hit taken from the tail", blocks)
        for block in blocks:
            inside = rc.next_to(rc.before[block], block) and rc.next_to(block, rc.after[block])
            c["split: a hit takes a block from inside a tail record"] += inside
            rc.unlink(block)

    def evicted(tail: FreeTail, blocks: list[int], num_blocks: int) -> None:
        rc.count("evict", blocks)
        c["evicting allocations"] += 1
        for block in blocks:
            rc.unlink(block)
        c["split: evictions end inside a record"] += rc.next_to(blocks[-1], rc.oldest)
        for block in blocks:
            del rc.ident[block]

    wrap(
        CacheMap,
        "cache_group",
        before=lambda pool, blocks, keys, group: cached(pool, blocks, [(key, group) for key in keys]),
    )
    wrap(CacheMap, "cache", before=cached_one)
    wrap(FreeTail, "extend", before=freed)
    wrap(FreeTail, "append", before=lambda tail, block: freed(tail, [block]))
    wrap(FreeTail, "take", before=taken)
    wrap(FreeTail, "pop_oldest", after=evicted)
    install_pool(rc)


def install_pool(rc: RecordCounts) -> None:
    c = rc.counts

    def shared_at_free(pool: BlockPool, hashed: list[int], kind: str) -> None:
        held_on = [block for block in hashed if pool.count_of(block) > 1]
        c["split: a free leaves blocks held by another request"] += bool(held_on)
        c["blocks held on at a free"] += len(held_on)

    def hit(pool: BlockPool, table: list[int | None], group: int) -> None:
        blocks = [block for block in table if block is not None]
        rc.count("hit", blocks)
        if blocks:
            digest, group, end = rc.ident[blocks[-1]]
            goes_on = pool.cached_in(digest << 64 | (end + rc.block_tokens[group]), group) is not None
            c["split: a hit stops where its run goes on in the map"] += goes_on

    def pool_made(pool: BlockPool, result: None, *args: Any) -> None:
        rc.group_kinds = pool.group_kinds

    original_cache_blocks = steps.cache_blocks

    def cache_blocks(layout, *args, **kwargs):
        rc.block_tokens = dict(enumerate(layout.group_blocks))
        return original_cache_blocks(layout, *args, **kwargs)

    wrap(BlockPool, "free_hashed", before=shared_at_free)
    wrap(BlockPool, "touch", before=hit)
    wrap(BlockPool, "__init__", after=pool_made)
    steps.cache_blocks = cache_blocks  # the manager and the decode loop call it through the module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trace", type=Path, default=None, help="a Mooncake trace (default: the conversation trace)"
    )
    parser.add_argument("--limit", type=int, default=1000, help="the trace's first N requests")
    parser.add_argument("--mode", choices=("replay", "timed"), default="replay")
    args = parser.parse_args()
    trace = import_mooncake(
        existing_trace(args.trace or mooncake_trace("conversation")), limit=args.limit, chains=True
    )
    rc = RecordCounts()
    install(rc)
    simulate(trace, SimConfig(policy="vllm", mode=args.mode, bounds=False))
    rc.counts["tail at the end blocks"] = len(rc.before)
    rc.counts["tail at the end records"] = rc.num_records(tail_order(rc))
    for name, value in sorted(rc.counts.items()):
        print(f"{name:58s} {value:>10,}")
    for op in sorted(name[: -len(" records")] for name in rc.counts if name.endswith(" records")):
        if rc.counts[f"{op} records"]:
            print(
                f"{op + ': blocks a record':58s} {rc.counts[f'{op} blocks'] / rc.counts[f'{op} records']:>10.1f}"
            )


def tail_order(rc: RecordCounts) -> list[int]:
    blocks, block = [], rc.oldest
    while block is not None:
        blocks.append(block)
        block = rc.after[block]
    return blocks


if __name__ == "__main__":
    main()
