"""``roofline_decode_run`` (``sim/cost/decode_run.py``, the step-by-step reference) with its settled steps in a
leaner loop: the same floats, bit for bit (``tests/test_decode_run_settled.py``).

Once every context is at or past the window (``settled`` steps in), each step adds the same FLOPs and bytes
(a FULL key per request, no SWA key): step ``settled + k`` reads ``first + k * per_step`` of each, where
``first`` is the figures of the contexts ``settled`` tokens on (``_first_step`` of them: integer sums, the
same integers the reference moves to step by step). Each duration is the reference's float operations on
those integers, without its per-step window check and with ``max`` of two floats written out (a call to the
builtin costs more than the rest of the step). The steps before ``settled`` are the reference's own loop.
"""

from __future__ import annotations

from sim.cost.decode_run import RooflineFigures, roofline_decode_run
from sim.cost.decode_run import _first_step as first_step_figures
from sim.cost.gpus import GPUSpec


def settled_decode_run(
    co: RooflineFigures,
    gpu: GPUSpec,
    contexts: tuple[int, ...],
    now: float,
    horizon: float,
    max_steps: int,
) -> tuple[list[float], list[float]]:
    """``roofline_decode_run(co, gpu, contexts, now, horizon, max_steps)``: the steps before every context
    reaches the window by the reference, the rest in the lean loop."""
    settled = max(co.window - min(contexts), 0) if contexts else 0
    if settled >= max_steps or not contexts:
        return roofline_decode_run(co, gpu, contexts, now, horizon, max_steps)
    starts: list[float] = []
    taken: list[float] = []
    if settled:
        starts, taken = roofline_decode_run(co, gpu, contexts, now, horizon, settled)
        if len(taken) < settled:
            return starts, taken
        now = starts[-1] + taken[-1]  # the reference's clock after its last step
    flops, bytes_read = first_step_figures(co, tuple(c + settled for c in contexts))
    n = len(contexts)
    flops_each, bytes_each = co.full_flops * n, n * co.full_bytes
    flops_rate, bytes_rate = gpu.peak_flops * gpu.mfu, gpu.mem_bandwidth * gpu.bw_efficiency
    overhead = gpu.step_overhead_s
    for _ in range(max_steps - settled):
        compute_s, memory_s = flops / flops_rate, bytes_read / bytes_rate
        # max(compute_s, memory_s): the first unless the second is larger
        duration = overhead + (memory_s if memory_s > compute_s else compute_s)
        if not now + duration < horizon:
            break
        starts.append(now)
        taken.append(duration)
        now = now + duration
        flops += flops_each
        bytes_read += bytes_each
    return starts, taken
