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
        """Keys of blocks ``0 .. num_blocks - 1`` of ``tokens`` (whole blocks only), extending ``known``."""
        keys = list(known or ())
        size = self.block_size
        parent = keys[-1] if keys else ROOT
        for index in range(len(keys), min(num_blocks, len(tokens) // size)):
            runs = tokens.slice(index * size, (index + 1) * size).runs
            parent = self._ids.setdefault((parent, runs), len(self._ids) + 1)
            keys.append(parent)
        return keys

    def __len__(self) -> int:
        return len(self._ids)
