"""A SWA window's release parted into hashed and unhashed blocks by the blocks' table positions, a slice a run
of positions, instead of reading each block's key by id (``by_id.split_set``: a scattered list read a block).
At 4,000 requests of the Mooncake trace ``vllm``'s windows release ~8.7 million blocks so, ~0.5 million of them
hashed, in a few runs a release (docs/results/presets-speed.md, Round 33).

Why the positions tell: a live block of a request's table is hashed exactly where (a) it is the hit's (a hit
takes hashed blocks, and a held block keeps its hash: only an eviction clears one, and the free queue holds no
held block), or (b) the request hashed it: the group's mask accepted its index below ``num_cached``
(``cache_blocks`` and the decode paths look at each index once, in order, and a block they skip is never hashed
later; a table slot is filled once and nulled once, and a block handed out is unhashed). SWA's mask keeps the
retention tails (``retention.reachable_indices``, the function ``cache_blocks`` asks); FULL's (every index) and
Mamba's (its exported checkpoint too) are not asked here.
"""

from __future__ import annotations

from sim.cache.blocks.layout import Layout
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable_indices

# True: a SWA window's release split by position (``HashedPositions``); False: the reference, ``by_id.split_set``
# reading each block's key (tests/test_vllm_hashed_positions_property.py)
BY_POSITION = True


class HashedPositions:
    """A manager's rules for which positions of a request's tables hold hashed blocks (its layout and retention
    interval: what ``cache_blocks`` hashes with)."""

    def __init__(self, layout: Layout, retention: int | None) -> None:
        self.layout, self.retention = layout, retention

    def hashed_runs(self, req: BlockRequest, group: int, lo: int, stop: int) -> list[tuple[int, int]]:
        """The positions in ``[lo, stop)`` of ``req``'s ``group`` table whose live blocks are hashed, as runs
        ``(start, stop)`` in increasing order (a SWA group)."""
        layout = self.layout
        kind, B = layout.group_kinds[group], layout.group_blocks[group]
        num_cached = min(stop, req.num_cached[group])  # (a window's release is always below it)
        # the hit's slots (a hit of ``h`` tokens fills ``h // B``), then what the mask kept past them
        num_hit = min(stop, req.hit.tokens // B)
        runs = [(lo, num_hit)] if lo < num_hit else []
        first = max(lo, num_hit)
        if first >= num_cached:
            return runs
        boundaries = (req.replay_boundary, req.junction)
        kept = reachable_indices(
            kind, first, num_cached, self.retention, B, layout.swa_need, boundaries, layout.block_size
        )
        return runs + _runs(kept)

    def split(self, req: BlockRequest, group: int, lo: int, stop: int) -> tuple[list[int], list[int]]:
        """The live blocks of positions ``stop - 1`` down to ``lo`` (highest first, as vLLM frees them): the
        hashed and the unhashed, each in that order (``by_id.split_set``'s answer, no block read by id)."""
        table = req.tables[group]
        hashed: list[int] = []
        unhashed: list[int] = []
        upper = stop
        # a held block is never 0, the null block: ``filter(None, ...)`` leaves out the nulls alone
        for start, end in reversed(self.hashed_runs(req, group, lo, stop)):
            unhashed.extend(filter(None, reversed(table[end:upper])))
            hashed.extend(filter(None, reversed(table[start:end])))
            upper = start
        unhashed.extend(filter(None, reversed(table[lo:upper])))
        return hashed, unhashed


def _runs(kept: range | list[int]) -> list[tuple[int, int]]:
    """``kept``'s indices (increasing) as runs ``(start, stop)``, neighbours in one."""
    if isinstance(kept, range):
        return [(kept.start, kept.stop)] if len(kept) else []
    runs: list[tuple[int, int]] = []
    for index in kept:
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    return runs
