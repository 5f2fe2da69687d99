"""Block identity: vLLM's chained block hash.

vLLM hashes block ``i`` as ``sha256(h_{i-1}, tokens of block i)`` (``kv_cache_utils.py:get_request_block_hasher``),
so a key stands for the whole prefix up to the block's end. Here the tokens of a block are its ``TokenSeq``
runs (equal runs are equal tokens: a sequence's runs are canonical), and a key is the 128-bit BLAKE2b digest
of the parent key and those runs: equal prefixes give equal keys, in O(runs) per block; unequal ones
collide with probability 2^-128 per pair, as vLLM's do with its digest. Keys live only as long as the blocks
and requests that hold them (a table of every block ever seen would grow with the trace).
"""

from __future__ import annotations

from hashlib import blake2b

from sim.tokens import TokenSeq

ROOT = b""  # the parent of block 0 (vLLM's NONE_HASH)


class BlockKeys:
    def __init__(self, block_size: int):
        self.block_size = block_size

    def chain(self, tokens: TokenSeq, num_blocks: int, known: list[bytes] | None = None) -> list[bytes]:
        """Keys of blocks ``0 .. num_blocks - 1`` of ``tokens`` (whole blocks only): ``known`` (the keys of its
        first blocks) extended in place."""
        keys = known if known is not None else []
        stop = min(num_blocks, len(tokens) // self.block_size)
        if len(keys) >= stop:
            return keys
        parent = keys[-1] if keys else ROOT
        for runs in _block_runs(tokens, len(keys) * self.block_size, stop * self.block_size, self.block_size):
            parent = blake2b(parent + repr(runs).encode(), digest_size=16).digest()
            keys.append(parent)
        return keys


def _block_runs(tokens: TokenSeq, start: int, stop: int, size: int):
    """The runs of each block ``[p, p + size)`` for ``p`` from ``start`` to ``stop``, in one pass over the runs
    (what ``tokens.slice(p, p + size).runs`` gives, without a bisect and a cut per block)."""
    runs = tokens.slice(start, stop).runs
    index, inside = 0, 0  # the run the next block starts in, and how far into it
    for _ in range((stop - start) // size):
        block, left = [], size
        while left:
            source, offset, length = runs[index]
            take = min(left, length - inside)
            block.append((source, offset + inside, take))
            left -= take
            inside += take
            if inside == length:
                index, inside = index + 1, 0
        yield tuple(block)
