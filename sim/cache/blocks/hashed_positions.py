"""A SWA window's release parted into hashed and unhashed blocks by the blocks' table positions, a slice a run
of positions, instead of reading each block's key by id (``by_id.split_set``: a scattered list read a block),
and the live run found from the window's top down without copying the table below it. At 4,000 requests of
the Mooncake trace ``vllm``'s windows release ~8.7 million blocks so (~75% of all block moves), ~0.5 million of
them hashed, in a few runs a release (docs/results/presets-speed.md, Rounds 33 and 34).

Why the positions tell: a live block of a request's table is hashed exactly where (a) it is the hit's (a hit
takes hashed blocks, and a held block keeps its hash: only an eviction clears one, and the free queue holds no
held block), or (b) the request hashed it: the group's mask accepted its index below ``num_cached``
(``cache_blocks`` and the decode paths look at each index once, in order, and a block they skip is never hashed
later; a table slot is filled once and nulled once, and a block handed out is unhashed). SWA's mask keeps the
retention tails (``retention.reachable_indices``, the function ``cache_blocks`` asks; under retention 0, the
presets' default, only the tails ending at the request's two boundaries, worked out here as at most two runs).
"""

from __future__ import annotations

from sim.cache.blocks import by_id
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import boundary_block_ends, reachable_indices
from sim.models import SWA

# True: a SWA window's release split by position (``HashedPositions``); False: the reference, ``by_id.split_set``
# reading each block's key (tests/test_vllm_hashed_positions_property.py)
BY_POSITION = True
# the first stretch below a window's top searched for its live run's end (a prefill chunk's release: hundreds)
FIRST_SPAN = 1024


class HashedPositions:
    """A manager's rules for which positions of a request's tables hold hashed blocks (its layout and retention
    interval: what ``cache_blocks`` hashes with)."""

    def __init__(self, layout: Layout, retention: int | None) -> None:
        self.layout, self.retention = layout, retention

    def release(self, req: BlockRequest, pool: BlockPool, group: int, top: int) -> int:
        """Free the live run of ``req``'s ``group`` table from ``top`` down (``release_window``'s frees, highest
        first), hashed and unhashed told apart by position; the number freed (the table is left as it is)."""
        live = live_below(req.tables[group], top)
        pool.free_split(*self.split(req, group, top + 1, live), group)
        return len(live)

    def hashed_runs(self, req: BlockRequest, group: int, lo: int, stop: int) -> list[tuple[int, int]]:
        """The positions in ``[lo, stop)`` of ``req``'s ``group`` table whose live blocks are hashed, as runs
        ``(start, stop)`` in increasing order (a SWA group)."""
        layout = self.layout
        B = layout.group_blocks[group]
        num_cached = min(stop, req.num_cached[group])  # (a window's release is always below it)
        # the hit's slots (a hit of ``h`` tokens fills ``h // B``), then what the mask kept past them
        num_hit = min(stop, req.hit.tokens // B)
        runs = [(lo, num_hit)] if lo < num_hit else []
        first = max(lo, num_hit)
        if first >= num_cached:
            return runs
        boundaries = (req.replay_boundary, req.junction)
        if self.retention == 0:  # no segment: the tails ending at the boundaries alone
            ends = boundary_block_ends(boundaries, B, layout.block_size)
            tails = [(max(first, end - layout.swa_need), min(num_cached, end)) for end in ends]
            return runs + _merged(sorted(tail for tail in tails if tail[0] < tail[1]))
        kept = reachable_indices(
            SWA, first, num_cached, self.retention, B, layout.swa_need, boundaries, layout.block_size
        )
        return runs + _runs(kept)

    def split(self, req: BlockRequest, group: int, stop: int, live: list[int]) -> tuple[list[int], list[int]]:
        """``live``, the blocks of positions ``stop - 1`` down to ``stop - len(live)`` (highest first, as vLLM
        frees them), parted into the hashed and the unhashed, each in that order (``by_id.split_set``'s
        answer, no block read by id)."""
        runs = self.hashed_runs(req, group, stop - len(live), stop)
        if not runs:
            return [], live
        hashed: list[int] = []
        unhashed: list[int] = []
        upper = stop  # position ``p`` is ``live[stop - 1 - p]``
        for start, end in reversed(runs):
            unhashed += live[stop - upper : stop - end]
            hashed += live[stop - end : stop - start]
            upper = start
        unhashed += live[stop - upper :]
        return hashed, unhashed


def live_below(table: list[int | None], top: int) -> list[int]:
    """The live blocks from ``top`` down to the first null under it, highest first: a stretch of the table
    below ``top`` copied at a time (four times longer each), not the whole table below it."""
    span = FIRST_SPAN
    while True:
        lo = max(0, top + 1 - span)
        below = table[lo : top + 1]
        below.reverse()
        num_live = by_id.first_none(below)
        if num_live < len(below) or not lo:
            return below[:num_live] if num_live < len(below) else below  # type: ignore[return-value]
        span *= 4


def _merged(tails: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted runs ``(start, stop)``, overlapping or touching ones made one."""
    runs: list[tuple[int, int]] = []
    for start, stop in tails:
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(stop, runs[-1][1]))
        else:
            runs.append((start, stop))
    return runs


def _runs(kept: range | list[int]) -> list[tuple[int, int]]:
    """``kept``'s indices (increasing) as runs ``(start, stop)``, neighbours in one."""
    if isinstance(kept, range):
        return [(kept.start, kept.stop)] if len(kept) else []
    return _merged([(index, index + 1) for index in kept])
