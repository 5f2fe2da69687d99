"""Block identity: vLLM's chained block hash, made exact.

vLLM hashes block ``i`` as ``sha256(h_{i-1}, tokens of block i)`` (``kv_cache_utils.py:get_request_block_hasher``),
so a key stands for the whole prefix up to the block's end. Here the tokens of a block are its ``TokenSeq``
runs (equal runs are equal tokens), and a key is a small integer interned from ``(parent key, runs)``: two
blocks get one key exactly when their prefixes are equal token for token, with no collision possible, in
O(runs) per block.
"""
from __future__ import annotations

from sim.tokens import TokenSeq

ROOT = 0  # the parent of block 0 (vLLM's NONE_HASH)


class BlockKeys:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self._ids: dict[tuple, int] = {}

    def chain(self, tokens: TokenSeq, num_blocks: int, known: list[int] | None = None) -> list[int]:
        """Keys of blocks ``0 .. num_blocks - 1`` of ``tokens`` (whole blocks only): ``known`` (the keys of its
        first blocks) extended in place."""
        keys = known if known is not None else []
        stop = min(num_blocks, len(tokens) // self.block_size)
        if len(keys) >= stop:
            return keys
        parent = keys[-1] if keys else ROOT
        ids = self._ids
        for runs in _block_runs(tokens, len(keys) * self.block_size, stop * self.block_size, self.block_size):
            parent = ids.setdefault((parent, runs), len(ids) + 1)
            keys.append(parent)
        return keys

    def __len__(self) -> int:
        return len(self._ids)


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
