"""The MAMBA mixer's short causal depthwise conv (+ SiLU), resuming from and updating a conv state.

The conv state of a sequence after its first q tokens is the conv input at positions ``[q-K+1, q)``
(K = kernel width). `causal_conv_with_state` prepends each item's state (zeros when it starts at 0)
to its new inputs, convolves, then stores the rows that end at each checkpoint and at the item's end.
All state traffic is exact copies; the arithmetic is a fixed tap order per element, so an output does
not depend on how the sequence was chunked.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.ragged import Checkpoints, Ragged


@triton.jit
def causal_conv_kernel(
    ext_ptr,
    item_ptr,
    w_ptr,
    b_ptr,
    o_ptr,
    T,
    C,
    s_e,
    s_o,
    KSIZE: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    r_ok, c_ok = rows < T, cols < C
    ok = r_ok[:, None] & c_ok[None, :]
    # item i's extended rows start K-1 rows per earlier item further down than its packed rows
    item = tl.load(item_ptr + rows, mask=r_ok, other=0)
    ext_rows = (rows + item * (KSIZE - 1)).to(tl.int64)
    acc = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
    for k in tl.static_range(KSIZE):
        x = tl.load(ext_ptr + (ext_rows + k)[:, None] * s_e + cols[None, :], mask=ok, other=0.0)
        w = tl.load(w_ptr + cols * KSIZE + k, mask=c_ok, other=0.0)
        acc += x.to(tl.float32) * w.to(tl.float32)[None, :]
    acc += tl.load(b_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)[None, :]
    y = acc / (1.0 + tl.exp(-acc))
    tl.store(o_ptr + rows[:, None].to(tl.int64) * s_o + cols[None, :], y.to(o_ptr.dtype.element_ty), mask=ok)


def conv_silu(ext: torch.Tensor, rag: Ragged, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """silu(causal conv) of packed extended inputs `ext` (per item: K-1 history rows, then its tokens)."""
    config.check_device(ext, weight, bias)
    C, ksize = weight.shape
    out = torch.empty((rag.num_tokens, C), dtype=ext.dtype, device=ext.device)
    grid = (triton.cdiv(rag.num_tokens, config.ROW_BLOCK), triton.cdiv(C, config.COL_BLOCK))
    causal_conv_kernel[grid](
        ext,
        rag.on("token_item", ext.device),
        weight.contiguous(),
        bias,
        out,
        rag.num_tokens,
        C,
        ext.stride(0),
        out.stride(0),
        KSIZE=ksize,
        BLOCK_T=config.ROW_BLOCK,
        BLOCK_C=config.COL_BLOCK,
        num_warps=config.NUM_WARPS,
    )
    return out


def conv_silu_ref(ext: torch.Tensor, rag: Ragged, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Plain torch, one token per call: taps summed in the kernel's order, then bias and SiLU."""
    C, ksize = weight.shape
    ext_rows = rag.token_item() * (ksize - 1) + np.arange(rag.num_tokens)
    w, b = weight.float(), bias.float()
    out = [_conv_row(ext[int(r) : int(r) + ksize].float(), w, b) for r in ext_rows]
    return torch.stack(out).to(ext.dtype) if out else ext.new_empty((0, C))


def _conv_row(window: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(b)
    for k in range(w.shape[1]):
        acc = acc + window[k] * w[:, k]
    acc = acc + b
    return acc / (1.0 + torch.exp(-acc))


ConvFn = Callable[[torch.Tensor, Ragged, torch.Tensor, torch.Tensor], torch.Tensor]


def causal_conv_with_state(
    xbc: torch.Tensor,
    rag: Ragged,
    state_ids: list[int],
    ckpts: Checkpoints,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    conv_fn: ConvFn = conv_silu,
) -> torch.Tensor:
    """Conv + SiLU of packed inputs `xbc` [T, C]; reads and updates `conv_state` [num_states, K-1, C]."""
    ksize = weight.shape[1]
    ext = _extend(xbc, rag, state_ids, conv_state, ksize)
    out = conv_fn(ext, rag, weight, bias)
    for i in range(rag.num_items):
        base, start = int(rag.q_off[i]) + i * (ksize - 1), int(rag.starts[i])
        for pos, dst in ckpts.of(i) + [(int(rag.ends[i]), state_ids[i])]:  # the running state last
            conv_state[dst] = ext[base + pos - start : base + pos - start + ksize - 1]
    return out


def _extend(
    xbc: torch.Tensor, rag: Ragged, state_ids: list[int], conv_state: torch.Tensor, ksize: int
) -> torch.Tensor:
    parts = []
    for i in range(rag.num_items):
        start, lo = int(rag.starts[i]), int(rag.q_off[i])
        # start == 0: the state slot is not this sequence's yet (it may hold NaN poison); use zeros
        hist = conv_state[state_ids[i]] if start > 0 else xbc.new_zeros((ksize - 1, xbc.shape[1]))
        parts += [hist.to(xbc.dtype), xbc[lo : lo + int(rag.lens[i])]]
    return torch.cat(parts)
