"""``roofline_decode_run`` (``sim/cost/decode_run.py``, the step-by-step reference) with its settled steps in a
leaner loop: the same floats, bit for bit (``tests/test_decode_run_settled.py``).

Once every context is at or past the window (``settled`` steps in), each step adds the same FLOPs and bytes
(a FULL key per request, no SWA key): step ``settled + k`` reads ``first + k * per_step`` of each, where
``first`` is the figures of the contexts ``settled`` tokens on (``_first_step`` of them: integer sums, the
same integers the reference moves to step by step). Each duration is the reference's float operations on
those integers, without its per-step window check and with ``max`` of two floats written out (a call to the
builtin costs more than the rest of the step). The steps before ``settled`` are the reference's own loop.

Where memory bounds the first and the last settled step (their ``memory_s > compute_s``) and every figure is
below 2**53 (so ``int / float`` rounds only the quotient), it bounds every step in between: the exact quotients
``B_k / bytes_rate - F_k / flops_rate`` are linear in ``k``, positive at both ends (rounding is monotone, so the
floats' order at an end is the exact one's), so positive throughout, and the rounded memory time is then at least
the rounded compute time: the step's ``max`` is its memory time (or an equal float). Such a run's durations are
then one list comprehension, its ends one ``accumulate`` (the same ``now + duration`` additions in order), cut
by bisection at the horizon (the durations are not negative, so the ends never fall). Switch
``MEMORY_BOUND_RUNS``.
"""

from __future__ import annotations

import bisect
from itertools import accumulate

import numpy as np

from sim.cost.decode_run import RooflineFigures, roofline_decode_run
from sim.cost.decode_run import _first_step as first_step_figures
from sim.cost.gpus import GPUSpec

# False: every settled step through the lean loop (the reference; tests/test_memory_bound_runs.py holds both
# equal, floats bit for bit and whole runs' tables); True: a memory-bound run's steps as lists (module docstring)
MEMORY_BOUND_RUNS = True
EXACT_INTS = 1 << 53  # ints below it convert to floats exactly
# True: a long memory-bound run asked for as arrays (``as_arrays``: the engine's plain runs) gives its starts and
# durations as float64 arrays, made by numpy's same float operations (``int64 -> float64`` exact below
# ``EXACT_INTS``, one division, one addition, ``add.accumulate`` adding in order), so no Python float is made a step;
# False: lists (the reference; tests/test_run_arrays_property.py holds both equal, floats bit for bit and whole
# runs' tables)
ARRAY_RUNS = True
ARRAY_MIN_STEPS = 48  # below it numpy's calls cost more than the lists' steps (~30 pure, more compiled)
StepTimes = (
    list[float] | np.ndarray
)  # a run's starts or durations: a list, or a float64 array (``ARRAY_RUNS``)


def settled_decode_run(
    co: RooflineFigures,
    gpu: GPUSpec,
    contexts: tuple[int, ...],
    now: float,
    horizon: float,
    max_steps: int,
    as_arrays: bool = False,
) -> tuple[StepTimes, StepTimes]:
    """``roofline_decode_run(co, gpu, contexts, now, horizon, max_steps)``: the steps before every context
    reaches the window by the reference, the rest in the lean loop (``as_arrays``: a long memory-bound run's as
    float64 arrays, ``ARRAY_RUNS``)."""
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
    figures = (flops, bytes_read, flops_each, bytes_each)
    if MEMORY_BOUND_RUNS and _memory_bound_throughout(gpu, figures, max_steps - settled):
        if as_arrays and ARRAY_RUNS and max_steps - settled >= ARRAY_MIN_STEPS:
            return _memory_bound_arrays(gpu, figures, now, horizon, max_steps - settled, starts, taken)
        return _memory_bound_steps(
            gpu, bytes_read, bytes_each, now, horizon, max_steps - settled, starts, taken
        )
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


def _memory_bound_throughout(gpu: GPUSpec, figures: tuple[int, int, int, int], num_steps: int) -> bool:
    """Whether memory bounds each of ``num_steps`` settled steps (the module docstring's proof): ``figures`` the
    first step's FLOPs and bytes and what each step adds, all ints, below ``EXACT_INTS`` through the run."""
    flops, bytes_read, flops_each, bytes_each = figures
    if num_steps < 2 or bytes_each <= 0 or flops_each < 0 or gpu.step_overhead_s < 0:
        return False
    if type(bytes_read) is not int or type(flops) is not int:
        return False
    last_flops, last_bytes = flops + (num_steps - 1) * flops_each, bytes_read + (num_steps - 1) * bytes_each
    if max(last_flops, last_bytes) >= EXACT_INTS or min(flops, bytes_read) < 0:
        return False
    flops_rate, bytes_rate = gpu.peak_flops * gpu.mfu, gpu.mem_bandwidth * gpu.bw_efficiency
    if not (flops_rate > 0 and bytes_rate > 0):
        return False
    return bytes_read / bytes_rate > flops / flops_rate and last_bytes / bytes_rate > last_flops / flops_rate


def _memory_bound_steps(
    gpu: GPUSpec,
    bytes_read: int,
    bytes_each: int,
    now: float,
    horizon: float,
    num_steps: int,
    starts: list[float],
    taken: list[float],
) -> tuple[list[float], list[float]]:
    """The lean loop's steps of a memory-bound run appended to ``starts`` and ``taken``: each duration the
    overhead plus its memory time, each start the previous end (``ends[0]`` is ``now`` itself)."""
    overhead, bytes_rate = gpu.step_overhead_s, gpu.mem_bandwidth * gpu.bw_efficiency
    stop = bytes_read + num_steps * bytes_each
    durations = [overhead + step_bytes / bytes_rate for step_bytes in range(bytes_read, stop, bytes_each)]
    ends = list(accumulate(durations, initial=now))
    num_taken = bisect.bisect_left(ends, horizon, 1) - 1  # the first end not before the horizon ends no step
    starts += ends[:num_taken]
    taken += durations[:num_taken]
    return starts, taken


def _memory_bound_arrays(
    gpu: GPUSpec,
    figures: tuple[int, int, int, int],
    now: float,
    horizon: float,
    num_steps: int,
    starts: list[float],
    taken: list[float],
) -> tuple[np.ndarray, np.ndarray]:
    """``_memory_bound_steps`` as float64 arrays, ``starts`` and ``taken`` (the reference's steps before) first:
    each step's bytes an exact int64 (below ``EXACT_INTS``), its duration the same division and addition, each
    end the end before plus its duration."""
    _, bytes_read, _, bytes_each = figures
    overhead, bytes_rate = gpu.step_overhead_s, gpu.mem_bandwidth * gpu.bw_efficiency
    stop = bytes_read + num_steps * bytes_each
    durations = np.arange(bytes_read, stop, bytes_each, dtype=np.int64) / bytes_rate
    durations += overhead
    ends = np.empty(num_steps + 1)
    ends[0] = now
    ends[1:] = durations
    np.add.accumulate(ends, out=ends)  # in order, as ``accumulate`` adds
    num_taken = int(ends[1:].searchsorted(horizon))  # the first end not before the horizon ends no step
    if not starts:
        return ends[:num_taken], durations[:num_taken]
    return np.concatenate((starts, ends[:num_taken])), np.concatenate((taken, durations[:num_taken]))
