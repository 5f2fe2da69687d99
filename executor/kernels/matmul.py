"""Batch-invariant matmul ``x @ w.T`` used for every projection and the LM head.

Fixed BLOCK_M/N/K and one K loop order: an output row is reduced the same way whether the batch has 1
row or 1000 and wherever the row sits. No split-K, no autotune. Under the interpreter the tile product is
a broadcast multiply + sum instead of `tl.dot`: the interpreter's `tl.dot` is numpy's matmul (OpenBLAS),
whose rounding of a row depends on the row's index in the tile (a 6-row micro-kernel), so a token would
change bits when the batch packing moved it; the sum form reduces every element in the same order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.reductions import SUM
from executor.kernels.rowwise import rowwise


@triton.jit
def bi_matmul_kernel(
    x_ptr,
    w_ptr,
    o_ptr,
    M,
    N,
    K,
    s_xm,
    s_wn,
    s_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BY_SUM: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok, n_ok = offs_m < M, offs_n < N
    a_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * s_xm + offs_k[None, :]
    b_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * s_wn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k0
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if BY_SUM:
            acc += tl.reduce(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], 1, SUM)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    o_ptrs = o_ptr + offs_m[:, None].to(tl.int64) * s_om + offs_n[None, :]
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _check(x: torch.Tensor, w: torch.Tensor) -> None:
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"matmul: need x [M, K] and w [N, K], got {tuple(x.shape)} and {tuple(w.shape)}")


def matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x [M, K] @ w[N, K].T -> [M, N] in x's dtype; a row's bits do not depend on the other rows."""
    _check(x, w)
    config.check_device(x, w)
    x, w = x.contiguous(), w.contiguous()
    (M, K), N = x.shape, w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return out
    bm, bn, bk = config.MATMUL_TILE
    bi_matmul_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        x,
        w,
        out,
        M,
        N,
        K,
        x.stride(0),
        w.stride(0),
        out.stride(0),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        BY_SUM=config.tile_product_by_sum(),
        num_warps=config.NUM_WARPS,
    )
    return out


def matmul_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Plain torch, one row per call, so a row never sees the batch (torch's own GEMM is not invariant)."""
    _check(x, w)
    w32 = w.float()
    return rowwise(lambda row: torch.nn.functional.linear(row.float(), w32), x).to(x.dtype)
