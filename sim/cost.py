"""Roofline step-time model: one engine step takes overhead + max(compute time, memory time).

Compute is the step's FLOPs at a fraction (mfu) of the GPU's dense bf16 peak; memory is the bytes it must
stream (weights once per step, then each request's KV and MAMBA state) at a fraction of the bandwidth. A
calibration file (sim/calibration.py), when given, replaces both with a fitted linear model.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.models import FULL, SWA, ModelSpec

if TYPE_CHECKING:
    from sim.calibration import Calibration


@dataclass(frozen=True)
class GPUSpec:
    name: str
    peak_flops: float  # dense bf16 FLOP/s
    mem_bandwidth: float  # bytes/s
    mfu: float  # fraction of peak_flops a whole forward pass reaches
    bw_efficiency: float  # fraction of mem_bandwidth a step's reads reach
    step_overhead_s: float  # launch, scheduling and sampling cost of any step

    def __post_init__(self) -> None:
        for knob in ("peak_flops", "mem_bandwidth", "mfu", "bw_efficiency"):
            if not getattr(self, knob) > 0:
                raise ValueError(f"gpu {self.name!r}: {knob} must be > 0, got {getattr(self, knob)}")
        if not self.step_overhead_s >= 0:
            raise ValueError(f"gpu {self.name!r}: step_overhead_s must be >= 0, got {self.step_overhead_s}")


GPUS: dict[str, GPUSpec] = {
    # peak and bandwidth as measured on this project's H200 (bf16 GEMM, streaming copy), below the 989 / 4.8
    # spec sheet, so the efficiencies left to apply are the whole forward's, not the hardware's
    "h200": GPUSpec("h200", peak_flops=790e12, mem_bandwidth=4.3e12, mfu=0.6, bw_efficiency=0.9,
                    step_overhead_s=1e-3),
    # H100 SXM spec sheet: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3
    "h100": GPUSpec("h100", peak_flops=989e12, mem_bandwidth=3.35e12, mfu=0.5, bw_efficiency=0.8,
                    step_overhead_s=1e-3),
    # RTX 4090, Ada whitepaper: 165.2 TFLOP/s dense bf16 tensor with fp32 accumulate (GeForce runs fp32
    # accumulate at half rate; 330 is the fp16-accumulate figure), 1.008 TB/s GDDR6X
    "rtx4090": GPUSpec("rtx4090", peak_flops=165.2e12, mem_bandwidth=1.008e12, mfu=0.5, bw_efficiency=0.8,
                       step_overhead_s=1e-3),
    # 2 CPU cores, measured here: torch fp32 1024^3 matmul ~70 GFLOP/s (bf16 matmul is ~100x slower on
    # these cores, so the CPU executor runs fp32), copy ~21 GB/s. Rough: the executor's interpreted Triton
    # kernels add a large per-step cost that only a calibration captures.
    "cpu": GPUSpec("cpu", peak_flops=70e9, mem_bandwidth=21e9, mfu=0.3, bw_efficiency=0.5,
                   step_overhead_s=20e-3),
}


def get_gpu(name: str) -> GPUSpec:
    if name not in GPUS:
        raise ValueError(f"unknown gpu {name!r}; choose from {', '.join(sorted(GPUS))}")
    return GPUS[name]


def _is_count(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class StepShape:
    """One engine step's batch: prefill chunks as (cached_len_before_chunk, chunk_len), decodes as the
    request's context length (tokens already in KV)."""

    prefill: tuple[tuple[int, int], ...] = ()
    decode: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefill", tuple(tuple(item) for item in self.prefill))
        object.__setattr__(self, "decode", tuple(self.decode))
        for index, item in enumerate(self.prefill):
            if len(item) != 2 or not _is_count(item[0], 0) or not _is_count(item[1], 1):
                raise ValueError(f"StepShape.prefill[{index}] must be (cached_len >= 0, chunk_len >= 1), got {item}")
        for index, context_len in enumerate(self.decode):
            if not _is_count(context_len, 0):
                raise ValueError(f"StepShape.decode[{index}] must be a context length >= 0, got {context_len!r}")
        if not self.prefill and not self.decode:
            raise ValueError("StepShape has neither prefill nor decode items: a step needs at least one token")

    @classmethod
    def trusted(cls, prefill: tuple[tuple[int, int], ...], decode: tuple[int, ...]) -> StepShape:
        """A shape the engine built from a scheduled batch: valid by construction, so unchecked."""
        shape = object.__new__(cls)
        object.__setattr__(shape, "prefill", prefill)
        object.__setattr__(shape, "decode", decode)
        return shape

    @property
    def num_prefill_tokens(self) -> int:
        return sum(chunk_len for _, chunk_len in self.prefill)

    @property
    def num_decode_tokens(self) -> int:
        return len(self.decode)

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens

    def token_runs(self) -> tuple[tuple[int, int], ...]:
        """Every item as (first position, token count): a decode is a one-token run at its context length."""
        return self.prefill + tuple((context_len, 1) for context_len in self.decode)

    def attended_context(self, window: int | None = None) -> int:
        """Keys attended, summed over the step's tokens: the token at position p sees min(p + 1, window)."""
        return sum(attended_sum(start, count, window) for start, count in self.token_runs())


def _arith_sum(lo: int, hi: int) -> int:
    return (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0


def attended_sum(start: int, count: int, window: int | None = None) -> int:
    """Sum over positions start .. start+count-1 of min(position + 1, window), in closed form."""
    lo, hi = start + 1, start + count
    if window is None or hi <= window:
        return _arith_sum(lo, hi)
    if lo > window:
        return count * window
    return _arith_sum(lo, window) + (hi - window) * window


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
        runs = shape.token_runs()
        full = sum(attended_sum(start, count) for start, count in runs)
        swa = sum(attended_sum(start, count, self.window) for start, count in runs) if self.swa_flops else 0
        return shape.num_tokens * self.per_token_flops + self.full_flops * full + self.swa_flops * swa

    def bytes_read(self, shape: StepShape) -> int:
        num_tokens = shape.num_tokens
        weights = self._weights.get(num_tokens)
        if weights is None:
            weights = self._weights[num_tokens] = self.model.weight_bytes_read(num_tokens)
        # FULL reads the whole prefix and writes the run; SWA reads only the window below the run; a MAMBA
        # state is read and written back once per step
        state = 0
        for start, count in shape.token_runs():
            state += ((start + count) * self.full_bytes + (min(start, self.window) + count) * self.swa_bytes
                      + self.state_bytes_twice)
        return weights + state


class CostModel:
    """Predicted seconds per engine step for one model on one GPU (or from a calibration file)."""

    def __init__(self, model: ModelSpec, gpu: GPUSpec, calibration: Calibration | None = None) -> None:
        for what, ours, theirs in (("model", model.name, calibration and calibration.model),
                                   ("gpu", gpu.name, calibration and calibration.gpu)):
            if theirs and theirs != ours:
                raise ValueError(f"calibration is for {what} {theirs!r}, but the cost model's {what} is {ours!r}")
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
        if self.calibration is not None:
            return self.calibration.predict_s(shape)
        return self.roofline(shape).total_s

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
        state = sum((c + 1) * co.full_bytes + (min(c, co.window) + 1) * co.swa_bytes + co.state_bytes_twice
                    for c in contexts)
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

    def prefill_time(self, prompt_len: int, cached_len: int = 0, chunk_size: int | None = None) -> float:
        """One request prefilled alone from cached_len, in chunks of chunk_size (one step when None)."""
        if not _is_count(prompt_len, 1) or not _is_count(cached_len, 0) or cached_len >= prompt_len:
            raise ValueError(f"prefill_time needs 0 <= cached_len < prompt_len, got cached_len={cached_len!r}, "
                             f"prompt_len={prompt_len!r} (the last prompt token is always recomputed)")
        if chunk_size is not None and not _is_count(chunk_size, 1):
            raise ValueError(f"prefill_time: chunk_size must be >= 1, got {chunk_size!r}")
        step = chunk_size or prompt_len
        starts = range(cached_len, prompt_len, step)
        return sum(self.step_time(StepShape(prefill=((s, min(step, prompt_len - s)),))) for s in starts)
