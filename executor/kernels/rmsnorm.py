"""RMSNorm over the last dimension: ``x * rsqrt(mean(x^2) + eps) * weight``, one row at a time.

Each row is reduced over its own full width in one tile (BLOCK_D >= D), so its bits never depend on the
other rows or on the row count.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.reductions import SUM
from executor.kernels.rowwise import rowwise


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, o_ptr, M, D, s_xm, s_om, eps, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    ok = (rows < M)[:, None] & (cols < D)[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * s_xm + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.reduce(x * x, 1, SUM) / D + eps)
    y = x * inv[:, None] * w[None, :]
    tl.store(o_ptr + rows[:, None].to(tl.int64) * s_om + cols[None, :], y.to(o_ptr.dtype.element_ty), mask=ok)


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 2 or weight.shape != (x.shape[1],):
        raise ValueError(
            f"rmsnorm: need x [M, D] and weight [D], got {tuple(x.shape)} and {tuple(weight.shape)}"
        )


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    _check(x, weight)
    config.check_device(x, weight)
    x = x.contiguous()
    M, D = x.shape
    out = torch.empty_like(x)
    if M == 0:
        return out
    rmsnorm_kernel[(triton.cdiv(M, config.ROW_BLOCK),)](
        x,
        weight,
        out,
        M,
        D,
        x.stride(0),
        out.stride(0),
        eps,
        BLOCK_R=config.ROW_BLOCK,
        BLOCK_D=triton.next_power_of_2(D),
        num_warps=config.NUM_WARPS,
    )
    return out


def _rmsnorm_row(row: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    row = row.float()
    return row * (1.0 / torch.sqrt((row * row).sum() / row.numel() + eps)) * weight


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    _check(x, weight)
    w32 = weight.float()
    return rowwise(lambda row: _rmsnorm_row(row, w32, eps), x).to(x.dtype)
