"""Which computed blocks get a hash (docs/vllm-rules.md section 5; each manager's ``reachable_block_mask``).

FULL hashes every full block. Under ``prefix_cache_retention_interval`` R, SWA keeps the tail of ``need``
blocks of every segment (a segment is the scheduler block A under ``None``, none under ``0``, R tokens under
``n > 0``: with one block size for every group, ``None`` keeps every block), and under ``0`` or ``n`` also
the tail ending at each aligned boundary (the prompt's last, ``floor((N-1)/A)*A``, and the junction). Mamba
keeps every state under ``None``; the state at each aligned boundary under ``0``; also those at multiples of
``n`` under ``n > 0``.
"""

from __future__ import annotations

from sim.models import FULL, SWA


def reachable(
    kind: str, index: int, retention: int | None, B: int, need: int, boundaries: tuple[int, ...], A: int = 0
) -> bool:
    """Block ``index`` is hashed (the mask as vLLM builds it, one index at a time; ``reachable_indices`` is the
    fast form). ``B``: the group's block size; ``A``: the scheduler block (``B`` where 0)."""
    A = A or B
    tail = need if kind == SWA else 1
    segment = _segment(kind, retention, A)
    if kind == FULL or (retention is None and kind != SWA) or (segment and tail >= segment // B):
        return True
    if segment and index % (segment // B) >= segment // B - tail:
        return True
    return retention is not None and any(
        end - tail <= index < end for end in boundary_block_ends(boundaries, B, A)
    )


def boundary_block_ends(boundaries: tuple[int, ...], B: int, A: int) -> list[int]:
    """The block each boundary ends, the boundary floored to the scheduler block first."""
    return [boundary // A * A // B for boundary in boundaries if boundary // A * A]


def _segment(kind: str, retention: int | None, A: int) -> int | None:
    """The tokens of one retention segment, or None where no segment keeps a tail."""
    if kind == SWA and retention is None:
        return A
    return retention or None


def reachable_indices(
    kind: str,
    first: int,
    stop: int,
    retention: int | None,
    B: int,
    need: int,
    boundaries: tuple[int, ...],
    A: int = 0,
) -> range | list[int]:
    """The indices in ``[first, stop)`` that the group's mask accepts, without testing every one: FULL and
    dense masks take them all, the others a few tails and a period."""
    A = A or B
    segment = _segment(kind, retention, A)
    tail = need if kind == SWA else 1
    if kind == FULL or (retention is None and kind != SWA) or (segment and tail >= segment // B):
        return range(first, stop)
    wanted: set[int] = set()
    if retention is not None:
        ends = boundary_block_ends(boundaries, B, A)
        wanted = {index for end in ends for index in range(max(first, end - tail), min(stop, end))}
    if segment:
        per = segment // B
        start = first - first % per
        wanted.update(
            index
            for base in range(start, stop, per)
            for index in range(base + per - tail, base + per)
            if first <= index < stop
        )
    return sorted(wanted)
