"""A hit's right-to-left scans answered a stretch of keys at a time: which blocks are cached in every group of a
kind is read in C passes (one ``__contains__`` pass over the stretch's keys a group) into a byte a block, and the
answer found in those bytes (``bytes.rfind``), not asked of the map a key and a group at a time.

``hit._swa_answer``'s scan (vLLM's ``SlidingWindowManager.find_longest_cache_hit``) returns at the first run of
``need`` cached blocks, read right to left, that ends on an aligned point: that is the largest aligned end ``e <=
top`` whose window ``[e - need, e)`` is all cached, and without one the leading run of cached blocks popped back to
an aligned point. The scan reads a window's worth below ``top`` first (most hits: the window at ``top`` is cached,
so ``need`` keys a group are read, as the scan reads them), then twice as far each time. A lookup has no side
effect, so which keys are read does not show; the answer is the same (tests/test_vllm_window_scan_property.py).

``misses.py``'s deepest point with a Mamba state, over every point of a blocked range, is read the same way.
"""

from __future__ import annotations

from operator import and_
from typing import Any

# True: the stretch reads; False: the reference, ``hit.is_cached`` and ``misses._has_state`` a block at a time
WINDOW_SCAN = True


def cached_flags(maps: list[dict[Any, int]], keys: list[Any]) -> bytes:
    """A byte a key: 1 where every one of ``maps`` (a kind's groups' maps) lists it."""
    flags = bytes(map(maps[0].__contains__, keys))
    for more in maps[1:]:
        flags = bytes(map(and_, flags, map(more.__contains__, keys)))
    return flags


def swa_answer(
    maps: list[dict[Any, int]], chain: list[Any], stride: int, top: int, need: int, B: int, A: int
) -> int:
    """``hit._swa_answer`` (``need`` >= 1): block ``i``'s key is ``chain[(i + 1) * stride - 1]``; a block past
    the chain is not cached, so no window ends past the chain's last whole block."""
    top = min(top, len(chain) // stride)
    window, step = b"\x01" * need, A // B
    low, flags, width = top, b"", need
    while low > 0:
        start = max(0, low - width)
        flags = cached_flags(maps, chain[(start + 1) * stride - 1 : low * stride : stride]) + flags
        low, width = start, width * 2
        end = aligned_end(flags, window, step, low)
        if end:
            return end * B
    run = flags.find(0)  # the leading run of cached blocks
    return (top if run < 0 else run) * B // A * A


def aligned_end(flags: bytes, window: bytes, step: int, low: int) -> int:
    """The largest end ``e`` (in blocks, ``flags`` read from block ``low``) of an all-cached ``window`` with ``e``
    a multiple of ``step``; 0 where none."""
    stop = len(flags)
    while True:
        at = flags.rfind(window, 0, stop)
        if at < 0:
            return 0
        end = low + at + len(window)
        if end % step == 0:
            return end
        stop = at + len(window) - 1
