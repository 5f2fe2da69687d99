"""Which computed blocks get a hash (docs/vllm-rules.md section 5; each manager's ``reachable_block_mask``).

FULL hashes every full block. Under ``prefix_cache_retention_interval`` R: ``None`` (dense) SWA and Mamba
hash every block they hold; ``0`` only the SWA tail of ``need`` blocks and the Mamba state at each aligned
boundary (the prompt's last, ``floor((N-1)/B)*B``, and the junction); ``n > 0`` also the last ``need`` SWA
blocks of every ``n``-token segment and the Mamba states at multiples of ``n``.
"""

from __future__ import annotations

from sim.models import FULL, SWA


def reachable(
    kind: str, index: int, retention: int | None, B: int, need: int, boundaries: tuple[int, ...]
) -> bool:
    if kind == FULL or retention is None:
        return True
    ends = [boundary // B for boundary in boundaries if boundary]
    if kind == SWA:
        per = retention // B
        if retention and (need >= per or index % per >= per - need):
            return True
        return any(end - need <= index < end for end in ends)
    if retention and (retention // B <= 1 or (index + 1) % (retention // B) == 0):
        return True
    return any(index == end - 1 for end in ends)


def reachable_indices(
    kind: str, first: int, stop: int, retention: int | None, B: int, need: int, boundaries: tuple[int, ...]
) -> range | list[int]:
    """The indices in ``[first, stop)`` that ``reachable`` accepts, without testing every one: FULL and dense
    retention take them all, the others a few tails and a period."""
    if (
        kind == FULL
        or retention is None
        or (retention and kind == SWA and need >= retention // B)
        or (retention and kind != SWA and retention // B <= 1)
    ):
        return range(first, stop)
    ends = [boundary // B for boundary in boundaries if boundary]
    if kind == SWA:
        wanted = {index for end in ends for index in range(max(first, end - need), min(stop, end))}
    else:
        wanted = {end - 1 for end in ends if first <= end - 1 < stop}
    if retention:
        per = retention // B
        tail = need if kind == SWA else 1
        start = first - first % per
        wanted.update(
            index
            for base in range(start, stop, per)
            for index in range(base + per - tail, base + per)
            if first <= index < stop
        )
    return sorted(wanted)
