"""A run of decode-only steps of one batch (each context one token longer than at the step before) up to a time
horizon: each step's start and duration, as the engine's clock would take them one after another.

``steps_before`` is the rule over any backend's step times (``decode_times``: one step at a time, the
reference); ``roofline_decode_run`` the same figures from the roofline in one tight loop: the step's FLOPs and
bytes are integers moved exactly from step to step, and each duration is made by the same float operations
on the same integers as ``CostModel.step_time`` of the step's shape, so it is the same float, bit for bit
(``tests/test_decode_run_property.py``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Protocol

from sim.cost.gpus import GPUSpec
from sim.models import ModelSpec


class RooflineFigures(Protocol):
    """A model's per-token and per-run figures, as the roofline reads them (``model._Coefficients``)."""

    model: ModelSpec
    per_token_flops: int
    full_flops: int
    swa_flops: int
    window: int
    full_bytes: int
    swa_bytes: int
    state_bytes_twice: int


def steps_before(
    durations: Iterable[float], now: float, horizon: float, max_steps: int
) -> tuple[list[float], list[float]]:
    """Start times and durations of the steps (``durations`` in order, at most ``max_steps``) that end before
    ``horizon``: each start is the previous start plus its duration, from ``now``."""
    starts: list[float] = []
    taken: list[float] = []
    for duration in durations:
        if len(taken) == max_steps or not now + duration < horizon:
            break
        starts.append(now)
        taken.append(duration)
        now = now + duration
    return starts, taken


def roofline_decode_run(
    co: RooflineFigures, gpu: GPUSpec, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int
) -> tuple[list[float], list[float]]:
    """``steps_before(CostModel.decode_times(contexts), now, horizon, max_steps)`` of an uncalibrated model."""
    flops, bytes_read = _first_step(co, contexts)
    flops_rate, bytes_rate = gpu.peak_flops * gpu.mfu, gpu.mem_bandwidth * gpu.bw_efficiency
    overhead, n = gpu.step_overhead_s, len(contexts)
    ordered = sorted(contexts)
    # after ``settled`` steps every context is at or past the window: each step then adds the same FLOPs and
    # bytes (a FULL key per request; no SWA key, the window being full)
    settled = max(co.window - ordered[0], 0) if contexts else 0
    full_step_flops, full_step_bytes = co.full_flops * n, n * co.full_bytes
    starts: list[float] = []
    taken: list[float] = []
    for step in range(max_steps):
        duration = overhead + max(flops / flops_rate, bytes_read / bytes_rate)
        if not now + duration < horizon:
            break
        starts.append(now)
        taken.append(duration)
        now = now + duration
        flops += full_step_flops
        bytes_read += full_step_bytes
        if step < settled:  # some context still below the window: its next token adds a SWA key
            if co.swa_flops:
                flops += co.swa_flops * bisect.bisect_left(ordered, co.window - step - 1)
            bytes_read += bisect.bisect_left(ordered, co.window - step) * co.swa_bytes
    return starts, taken


def _first_step(co: RooflineFigures, contexts: tuple[int, ...]) -> tuple[int, int]:
    """The first step's FLOPs and bytes read (weights, KV, states), as ``_Coefficients`` counts them."""
    n = len(contexts)
    full_att = sum(c + 1 for c in contexts)
    swa_att = sum(min(c + 1, co.window) for c in contexts) if co.swa_flops else 0
    state = sum(
        (c + 1) * co.full_bytes + (min(c, co.window) + 1) * co.swa_bytes + co.state_bytes_twice
        for c in contexts
    )
    flops = n * co.per_token_flops + co.full_flops * full_att + co.swa_flops * swa_att
    return flops, co.model.weight_bytes_read(n) + state
