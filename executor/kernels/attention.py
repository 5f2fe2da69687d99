"""Paged causal attention with an optional sliding window, over per-position slot tables.

Query position i of an item sees key positions j with ``i - window <= j <= i`` (window 0: all j <= i):
the window counts the keys *before* the query, SGLang's two-side-inclusive ``sliding_window_size`` (its
FlashAttention ``window_size=(W, 0)``), so a prefix hit at P needs SWA KV of ``[P - W, P)`` exactly as the
simulator's match rule assumes (README).
Keys and values of position j live at row ``slots[j]`` of the layer's K/V pool ``[num_slots, Hkv, D]``;
the new tokens' K/V are written there before the call, so one kernel serves prefill with a cached
prefix, plain prefill and decode, for a ragged batch, with GQA (``Hq`` a multiple of ``Hkv``).

Bit-exactness across chunking: query tiles start at absolute multiples of BLOCK_M, and the key loop
walks absolute BLOCK_N-aligned blocks, so a query meets the same blocks with the same contents in
every chunking; blocks it cannot see are exact no-ops of the online softmax. Key positions no query in
the tile can see are never loaded (they may be freed and NaN-poisoned); a slot of -1 that a query does
need reads as NaN, so a policy that freed live KV shows up as NaN logits.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.ragged import Ragged, SlotTable, to_device
from executor.kernels.reductions import MAX, SUM


@triton.jit
def paged_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    slots_ptr,
    tile_item_ptr,
    tile_lo_ptr,
    q_off_ptr,
    start_ptr,
    end_ptr,
    slot_off_ptr,
    s_qt,
    s_qh,
    s_kt,
    s_kh,
    s_ot,
    s_oh,
    window,
    sm_scale,
    head_dim,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BY_SUM: tl.constexpr,
):
    # one program: BLOCK_M query positions x the GROUP query heads that share KV head `hk`
    tile, hk = tl.program_id(0), tl.program_id(1)
    item, lo = tl.load(tile_item_ptr + tile), tl.load(tile_lo_ptr + tile)
    start, end = tl.load(start_ptr + item), tl.load(end_ptr + item)
    slot_base = slots_ptr + tl.load(slot_off_ptr + item).to(tl.int64)
    r = tl.arange(0, BLOCK_M * BLOCK_G)
    pos_m, g = lo + r // BLOCK_G, r % BLOCK_G
    row_ok = (pos_m >= start) & (pos_m < end) & (g < GROUP)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    q_rows = (tl.load(q_off_ptr + item) + pos_m - start).to(tl.int64)
    q_idx = q_rows[:, None] * s_qt + (hk * GROUP + g)[:, None] * s_qh + offs_d[None, :]
    o_idx = q_rows[:, None] * s_ot + (hk * GROUP + g)[:, None] * s_oh + offs_d[None, :]
    io_ok = row_ok[:, None] & d_ok[None, :]
    q = tl.load(q_ptr + q_idx, mask=io_ok, other=0.0).to(tl.float32) * sm_scale
    hi = tl.minimum(lo + BLOCK_M, end)
    # the lowest key any valid query of this tile may read; the loop itself starts BLOCK_N-aligned
    kv_lo = tl.where(window > 0, tl.maximum(tl.maximum(lo, start) - window, 0), 0)
    m_i = tl.full([BLOCK_M * BLOCK_G], -1.0e30, tl.float32)  # finite: fully masked blocks leave acc at 0
    l_i = tl.zeros([BLOCK_M * BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_M * BLOCK_G, BLOCK_D], tl.float32)
    kv_col = hk * s_kh + offs_d[None, :]
    for n0 in range((kv_lo // BLOCK_N) * BLOCK_N, hi, BLOCK_N):
        pos_n = n0 + tl.arange(0, BLOCK_N)
        need = (pos_n >= kv_lo) & (pos_n < hi)
        slot = tl.load(slot_base + pos_n, mask=need, other=0)
        kv_idx = slot.to(tl.int64)[:, None] * s_kt + kv_col
        ld = (need & (slot >= 0))[:, None] & d_ok[None, :]
        freed = (need & (slot < 0))[:, None]
        k = tl.where(freed, float("nan"), tl.load(k_ptr + kv_idx, mask=ld, other=0.0).to(tl.float32))
        v = tl.where(freed, float("nan"), tl.load(v_ptr + kv_idx, mask=ld, other=0.0).to(tl.float32))
        if BY_SUM:  # see matmul.py: numpy's matmul rounds a row by its index in the tile
            qk = tl.reduce(q[:, :, None] * tl.trans(k)[None, :, :], 1, SUM)
        else:
            qk = tl.dot(q, tl.trans(k))
        vis = (pos_n[None, :] <= pos_m[:, None]) & need[None, :]
        vis = vis & ((pos_n[None, :] >= pos_m[:, None] - window) | (window <= 0))
        qk = tl.where(vis, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.reduce(qk, 1, MAX))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.reduce(p, 1, SUM)
        if BY_SUM:
            pv = tl.reduce(p[:, :, None] * v[None, :, :], 1, SUM)
        else:
            pv = tl.dot(p, v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # l_i is 0 only on rows that are not stored
    tl.store(o_ptr + o_idx, out.to(o_ptr.dtype.element_ty), mask=io_ok)


def query_tiles(rag: Ragged, block_m: int) -> tuple[np.ndarray, np.ndarray]:
    """(item, first position) of every query tile; tiles sit at absolute multiples of block_m."""
    first = rag.starts // block_m
    count = (rag.ends - 1) // block_m - first + 1
    items = np.repeat(np.arange(rag.num_items, dtype=np.int64), count)
    within = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    return items, (np.repeat(first, count) + within) * block_m


def paged_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    rag: Ragged,
    slots: SlotTable,
    window: int,
    sm_scale: float,
) -> torch.Tensor:
    """q [T, Hq, D] (packed by `rag`) -> out [T, Hq, D]; K/V pools [num_slots, Hkv, D]."""
    check_attention_args(q, k_pool, v_pool, rag)
    config.check_device(q, k_pool, v_pool)
    num_hq, head_dim = q.shape[1], q.shape[2]
    out = torch.empty_like(q)
    items, los = query_tiles(rag, config.ATTN_BLOCK_M)
    dev = q.device
    group = num_hq // k_pool.shape[1]
    paged_attention_kernel[(len(items), k_pool.shape[1])](
        q,
        k_pool,
        v_pool,
        out,
        to_device(slots.flat, dev),
        to_device(items, dev),
        to_device(los, dev),
        rag.on("q_off", dev),
        rag.on("starts", dev),
        rag.on("ends", dev),
        to_device(slots.off, dev),
        q.stride(0),
        q.stride(1),
        k_pool.stride(0),
        k_pool.stride(1),
        out.stride(0),
        out.stride(1),
        window,
        sm_scale,
        head_dim,
        GROUP=group,
        BLOCK_G=triton.next_power_of_2(group),
        BLOCK_M=config.ATTN_BLOCK_M,
        BLOCK_N=config.ATTN_BLOCK_N,
        BLOCK_D=triton.next_power_of_2(head_dim),
        BY_SUM=config.tile_product_by_sum(),
        num_warps=config.NUM_WARPS,
    )
    return out


def check_attention_args(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, rag: Ragged) -> None:
    if q.dim() != 3 or q.shape[0] != rag.num_tokens or q.stride(2) != 1:
        raise ValueError(
            f"attention: q must be [{rag.num_tokens}, Hq, D] with unit last stride, got {tuple(q.shape)}"
        )
    if k_pool.shape != v_pool.shape or k_pool.dim() != 3 or k_pool.shape[2] != q.shape[2]:
        raise ValueError(
            f"attention: K/V pools must both be [slots, Hkv, {q.shape[2]}], got "
            f"{tuple(k_pool.shape)} and {tuple(v_pool.shape)}"
        )
    if q.shape[1] % k_pool.shape[1] or k_pool.stride(2) != 1 or k_pool.stride() != v_pool.stride():
        raise ValueError(
            f"attention: {q.shape[1]} query heads is not a multiple of {k_pool.shape[1]} KV "
            "heads, or the K/V pools are laid out differently"
        )
