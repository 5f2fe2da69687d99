"""The SiLU gate ``silu(gate) * up`` (the MLP's, and the MAMBA mixer's ``y * silu(z)``).

Elementwise, so a value's bits depend only on its two inputs; ``silu(g) = g / (1 + exp(-g))`` is written
out so the GPU and the interpreter use the same formula.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.rowwise import rowwise


@triton.jit
def silu_mul_kernel(
    g_ptr, u_ptr, o_ptr, M, F, s_gm, s_um, s_om, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ok = (rows < M)[:, None] & (cols < F)[None, :]
    g = tl.load(g_ptr + rows[:, None] * s_gm + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + rows[:, None] * s_um + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(o_ptr + rows[:, None] * s_om + cols[None, :], y.to(o_ptr.dtype.element_ty), mask=ok)


def _check(gate: torch.Tensor, up: torch.Tensor) -> None:
    if gate.dim() != 2 or gate.shape != up.shape:
        raise ValueError(
            f"silu_mul: need gate and up of one [M, F] shape, got {tuple(gate.shape)} and {tuple(up.shape)}"
        )


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up; inputs may be column slices of a wider matrix (row stride kept)."""
    _check(gate, up)
    config.check_device(gate, up)
    if gate.stride(1) != 1 or up.stride(1) != 1:
        gate, up = gate.contiguous(), up.contiguous()
    M, F = gate.shape
    out = torch.empty((M, F), dtype=gate.dtype, device=gate.device)
    if M == 0:
        return out
    grid = (triton.cdiv(M, config.ROW_BLOCK), triton.cdiv(F, config.COL_BLOCK))
    silu_mul_kernel[grid](
        gate,
        up,
        out,
        M,
        F,
        gate.stride(0),
        up.stride(0),
        out.stride(0),
        BLOCK_R=config.ROW_BLOCK,
        BLOCK_C=config.COL_BLOCK,
        num_warps=config.NUM_WARPS,
    )
    return out


def _silu_mul_row(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    g = g.float()
    return g / (1.0 + torch.exp(-g)) * u.float()


def silu_mul_ref(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    _check(gate, up)
    return rowwise(_silu_mul_row, gate, up).to(gate.dtype)
