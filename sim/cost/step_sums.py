"""A step's FLOPs and bytes read, the roofline's two integers, in one pass over its prefill chunks and decodes.

``_Coefficients.flops`` and ``bytes_read`` (``model.py``) each walk the shape two or three times (a ``sum`` of a
generator per term) and are the reference; ``step_time`` runs on every full engine step (in ``marconi-vllm``
timed, 138k steps at 1,000 requests, ~10% of the profiled run), so it takes both from here. Every term is an
integer, so the same sums taken in another order are the same numbers, and the seconds made from them the
same floats. Switch: ``ONE_PASS`` (tests/test_step_sums_property.py holds both equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.cost.shape import attended_sum

if TYPE_CHECKING:
    from sim.cost.decode_run import RooflineFigures

# False: ``step_time`` asks ``flops`` and ``bytes_read`` (the reference)
ONE_PASS = True


def step_sums(
    co: RooflineFigures, prefill: tuple[tuple[int, int], ...], decode: tuple[int, ...]
) -> tuple[int, int, int]:
    """``co.flops(shape)``, ``co.bytes_read(shape)`` less the weights', and the step's token count (the
    weights' bytes depend on it alone: the caller's memo), of the shape ``(prefill, decode)``. A decode at
    context ``c`` attends ``min(c + 1, window)`` SWA keys and reads ``min(c, window) + 1``; a chunk
    ``(start, count)`` reads its prefix and itself in FULL, ``min(start, window) + count`` in SWA."""
    window, num_decode = co.window, len(decode)
    full_keys = sum(decode) + num_decode  # FULL keys attended, and FULL tokens read, by the decodes
    full_att = full_read = full_keys
    num_tokens = num_decode
    swa_att = swa_read = 0
    with_swa = co.swa_flops != 0
    for start, count in prefill:
        num_tokens += count
        full_att += attended_sum(start, count)
        full_read += start + count
        swa_read += (start if start < window else window) + count
        if with_swa:
            swa_att += attended_sum(start, count, window)
    for context in decode:
        if context < window:
            swa_att += context + 1
            swa_read += context + 1
        else:
            swa_att += window
            swa_read += window + 1
    flops = num_tokens * co.per_token_flops + co.full_flops * full_att
    if with_swa:
        flops += co.swa_flops * swa_att
    state_bytes = (num_decode + len(prefill)) * co.state_bytes_twice
    return flops, full_read * co.full_bytes + swa_read * co.swa_bytes + state_bytes, num_tokens
