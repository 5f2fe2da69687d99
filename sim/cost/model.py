"""Roofline step-time model: one engine step takes overhead + max(compute time, memory time).

Compute is the step's FLOPs at a fraction (mfu) of the GPU's dense bf16 peak; memory is the bytes it must
stream (weights once per step, then each request's KV and MAMBA state) at a fraction of the bandwidth. A
calibration file (sim/cost/calibration.py), when given, replaces both with a fitted linear model.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.cost import step_sums as step_sums_module
from sim.cost.decode_run import steps_before
from sim.cost.decode_run_settled import StepTimes, settled_decode_run
from sim.cost.gpus import GPUSpec
from sim.cost.shape import StepShape, attended_sum, is_count
from sim.cost.step_sums import step_sums
from sim.models import FULL, SWA, ModelSpec

if TYPE_CHECKING:
    from sim.cost.calibration import Calibration


@dataclass(frozen=True)
class StepCost:
    flops: int
    bytes_read: int
    compute_s: float
    memory_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.overhead_s + max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def step_flops(model: ModelSpec, shape: StepShape) -> int:
    """FLOPs of one step, as the cost model counts them."""
    return _Coefficients(model).flops(shape)


def step_bytes(model: ModelSpec, shape: StepShape) -> int:
    """Bytes read by one step (weights, KV, MAMBA states), as the cost model counts them."""
    return _Coefficients(model).bytes_read(shape)


class _Coefficients:
    """The model's per-token and per-run figures, read once: ``step_time`` runs on every engine step."""

    def __init__(self, model: ModelSpec) -> None:
        self.model = model
        self.per_token_flops = 2 * model.active_param_count() + model.state_flops_per_token()
        self.full_flops = model.attention_flops_per_attended_token(FULL)
        self.swa_flops = model.attention_flops_per_attended_token(SWA) if model.has_swa else 0
        self.window = model.window
        self.full_bytes = model.full_kv_bytes_per_token()
        self.swa_bytes = model.swa_kv_bytes_per_token()
        self.state_bytes_twice = 2 * model.mamba_state_bytes()
        self._weights: dict[int, int] = {}

    def flops(self, shape: StepShape) -> int:
        """``num_tokens * per_token_flops`` plus each kind's FLOPs per attended key times the keys the step's
        tokens attend (``shape.attended_context``); a decode at context ``c`` attends ``c + 1`` keys, at most
        the window's, summed over the decodes at once (integers: the same sum)."""
        decode, window = shape.decode, self.window
        full = sum(decode) + len(decode)
        full += sum(attended_sum(start, count) for start, count in shape.prefill)
        num_tokens = len(decode) + sum(count for _, count in shape.prefill)
        flops = num_tokens * self.per_token_flops + self.full_flops * full
        if not self.swa_flops:
            return flops
        swa = sum(attended_sum(start, count, window) for start, count in shape.prefill)
        swa += sum(c + 1 if c < window else window for c in decode)
        return flops + self.swa_flops * swa

    def bytes_read(self, shape: StepShape) -> int:
        """Weights once, then per token run: FULL reads the whole prefix and writes the run, SWA reads only the
        window below the run, a MAMBA state is read and written back once (a decode is a run of one, its sums
        taken over the decodes at once: integers, the same sum)."""
        decode, window, prefill = shape.decode, self.window, shape.prefill
        num_tokens = len(decode) + sum(count for _, count in prefill)
        weights = self.weight_bytes(num_tokens)
        num_runs = len(decode) + len(prefill)
        full = sum(decode) + len(decode) + sum(start + count for start, count in prefill)
        swa = sum(c if c < window else window for c in decode) + len(decode)
        swa += sum(min(start, window) + count for start, count in prefill)
        return weights + full * self.full_bytes + swa * self.swa_bytes + num_runs * self.state_bytes_twice

    def weight_bytes(self, num_tokens: int) -> int:
        """The weights' bytes a step of ``num_tokens`` reads, remembered per count."""
        weights = self._weights.get(num_tokens)
        if weights is None:
            weights = self._weights[num_tokens] = self.model.weight_bytes_read(num_tokens)
        return weights


class CostModel:
    """Predicted seconds per engine step for one model on one GPU (or from a calibration file)."""

    def __init__(self, model: ModelSpec, gpu: GPUSpec, calibration: Calibration | None = None) -> None:
        for what, ours, theirs in (
            ("model", model.name, calibration and calibration.model),
            ("gpu", gpu.name, calibration and calibration.gpu),
        ):
            if theirs and theirs != ours:
                raise ValueError(
                    f"calibration is for {what} {theirs!r}, but the cost model's {what} is {ours!r}"
                )
        self.model = model
        self.gpu = gpu
        self.calibration = calibration
        self._coefficients = _Coefficients(model)

    def roofline(self, shape: StepShape) -> StepCost:
        """The analytic breakdown (ignores any calibration)."""
        flops = self._coefficients.flops(shape)
        bytes_read = self._coefficients.bytes_read(shape)
        compute_s = flops / (self.gpu.peak_flops * self.gpu.mfu)
        memory_s = bytes_read / (self.gpu.mem_bandwidth * self.gpu.bw_efficiency)
        return StepCost(flops, bytes_read, compute_s, memory_s, self.gpu.step_overhead_s)

    def step_time(self, shape: StepShape) -> float:
        """``roofline(shape).total_s`` (or the calibration's), the same float operations without the record."""
        if self.calibration is not None:
            return self.calibration.predict_s(shape)
        co, gpu = self._coefficients, self.gpu
        if step_sums_module.ONE_PASS:
            flops, bytes_read, num_tokens = step_sums(co, shape.prefill, shape.decode)
            bytes_read += co.weight_bytes(num_tokens)
        else:
            flops, bytes_read = co.flops(shape), co.bytes_read(shape)
        compute_s = flops / (gpu.peak_flops * gpu.mfu)
        memory_s = bytes_read / (gpu.mem_bandwidth * gpu.bw_efficiency)
        return gpu.step_overhead_s + max(compute_s, memory_s)

    def decode_times(self, contexts: tuple[int, ...]):
        """Step times of successive decode-only steps over the same requests, each context one longer
        than the step before: equal, bit for bit, to ``step_time`` of each step's shape."""
        if self.calibration is not None:
            while True:
                yield self.step_time(StepShape.trusted((), contexts))
                contexts = tuple(c + 1 for c in contexts)
        co, gpu, n = self._coefficients, self.gpu, len(contexts)
        ordered = sorted(contexts)
        flops_rate, bytes_rate = gpu.peak_flops * gpu.mfu, gpu.mem_bandwidth * gpu.bw_efficiency
        full_att = sum(c + 1 for c in contexts)
        swa_att = sum(min(c + 1, co.window) for c in contexts) if co.swa_flops else 0
        state = sum(
            (c + 1) * co.full_bytes + (min(c, co.window) + 1) * co.swa_bytes + co.state_bytes_twice
            for c in contexts
        )
        weights = co.model.weight_bytes_read(n)
        step = 0
        while True:
            flops = n * co.per_token_flops + co.full_flops * full_att + co.swa_flops * swa_att
            yield gpu.step_overhead_s + max(flops / flops_rate, (weights + state) / bytes_rate)
            # integer sums move exactly: each context grows by one, capped where it reaches the window
            below_window = bisect.bisect_left(ordered, co.window - step - 1)  # c + step + 1 < window
            full_att += n
            swa_att += below_window if co.swa_flops else 0
            state += n * co.full_bytes + bisect.bisect_left(ordered, co.window - step) * co.swa_bytes
            step += 1

    def decode_run(
        self, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int, as_arrays: bool = False
    ) -> tuple[StepTimes, StepTimes]:
        """The starts and durations of the decode steps ``decode_times`` gives that end before ``horizon``
        (``steps_before``), at most ``max_steps``: the roofline's in tight loops (``decode_run_settled``), the
        same floats (``as_arrays``: maybe as float64 arrays, ``decode_run_settled.ARRAY_RUNS``)."""
        if self.calibration is not None:
            return steps_before(self.decode_times(contexts), now, horizon, max_steps)
        co = self._coefficients
        return settled_decode_run(co, self.gpu, contexts, now, horizon, max_steps, as_arrays)

    def prefill_time(self, prompt_len: int, cached_len: int = 0, chunk_size: int | None = None) -> float:
        """One request prefilled alone from cached_len, in chunks of chunk_size (one step when None)."""
        if not is_count(prompt_len, 1) or not is_count(cached_len, 0) or cached_len >= prompt_len:
            raise ValueError(
                f"prefill_time needs 0 <= cached_len < prompt_len, got cached_len={cached_len!r}, "
                f"prompt_len={prompt_len!r} (the last prompt token is always recomputed)"
            )
        if chunk_size is not None and not is_count(chunk_size, 1):
            raise ValueError(f"prefill_time: chunk_size must be >= 1, got {chunk_size!r}")
        step = chunk_size or prompt_len
        starts = range(cached_len, prompt_len, step)
        return sum(self.step_time(StepShape(prefill=((s, min(step, prompt_len - s)),))) for s in starts)
