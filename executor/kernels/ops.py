"""The two interchangeable kernel sets the model runs on: Triton kernels or their torch references.

Both keep a token's result independent of its batch (see each module), so either set gives bit-exact
logits across chunking, batching and resuming; they agree with each other only to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from executor.kernels.attention import paged_attention
from executor.kernels.attention_ref import paged_attention_ref
from executor.kernels.conv import conv_silu, conv_silu_ref
from executor.kernels.matmul import matmul, matmul_ref
from executor.kernels.rmsnorm import rmsnorm, rmsnorm_ref
from executor.kernels.scan import ssm_scan
from executor.kernels.scan_ref import ssm_scan_ref
from executor.kernels.silu_mul import silu_mul, silu_mul_ref


@dataclass(frozen=True)
class KernelOps:
    name: str
    matmul: Callable
    rmsnorm: Callable
    silu_mul: Callable
    attention: Callable
    conv_silu: Callable
    ssm_scan: Callable


TRITON = KernelOps("triton", matmul, rmsnorm, silu_mul, paged_attention, conv_silu, ssm_scan)
TORCH = KernelOps(
    "torch", matmul_ref, rmsnorm_ref, silu_mul_ref, paged_attention_ref, conv_silu_ref, ssm_scan_ref
)
KERNEL_SETS = {ops.name: ops for ops in (TRITON, TORCH)}


def get_ops(name: str) -> KernelOps:
    if name not in KERNEL_SETS:
        raise ValueError(f"unknown kernels {name!r}; choose from {', '.join(sorted(KERNEL_SETS))}")
    return KERNEL_SETS[name]
