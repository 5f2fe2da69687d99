"""GPU presets of the cost model: peak dense bf16 FLOP/s, memory bandwidth and the fraction of each a
step reaches."""

from __future__ import annotations

from dataclasses import dataclass


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
    "h200": GPUSpec(
        "h200", peak_flops=790e12, mem_bandwidth=4.3e12, mfu=0.6, bw_efficiency=0.9, step_overhead_s=1e-3
    ),
    # H100 SXM spec sheet: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3
    "h100": GPUSpec(
        "h100", peak_flops=989e12, mem_bandwidth=3.35e12, mfu=0.5, bw_efficiency=0.8, step_overhead_s=1e-3
    ),
    # RTX 4090, Ada whitepaper: 165.2 TFLOP/s dense bf16 tensor with fp32 accumulate (GeForce runs fp32
    # accumulate at half rate; 330 is the fp16-accumulate figure), 1.008 TB/s GDDR6X
    "rtx4090": GPUSpec(
        "rtx4090",
        peak_flops=165.2e12,
        mem_bandwidth=1.008e12,
        mfu=0.5,
        bw_efficiency=0.8,
        step_overhead_s=1e-3,
    ),
    # 2 CPU cores, measured here: torch fp32 1024^3 matmul ~70 GFLOP/s (bf16 matmul is ~100x slower on
    # these cores, so the CPU executor runs fp32), copy ~21 GB/s. Rough: the executor's interpreted Triton
    # kernels add a large per-step cost that only a calibration captures.
    "cpu": GPUSpec(
        "cpu", peak_flops=70e9, mem_bandwidth=21e9, mfu=0.3, bw_efficiency=0.5, step_overhead_s=20e-3
    ),
}


def get_gpu(name: str) -> GPUSpec:
    if name not in GPUS:
        raise ValueError(f"unknown gpu {name!r}; choose from {', '.join(sorted(GPUS))}")
    return GPUS[name]
