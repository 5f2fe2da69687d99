"""The layers' token mixers: paged attention with RoPE (FULL: causal; SWA: the window), the MAMBA mixer
(Mamba2 or GatedDeltaNet: in_proj -> short conv + SiLU -> the scan -> y * silu(z) -> out_proj), and the short
causal conv + SiLU that an sconv model applies to a stream (k, v, attention output, MLP output) with its
window kept in the layer's conv state."""

from __future__ import annotations

import torch

from executor.kernels.conv import causal_conv_with_state
from executor.kernels.ops import KernelOps
from executor.kernels.rope import apply_rope
from executor.pools import Pools
from executor.step import Step
from executor.weights import k_is_v, kv_geometry, sconv_streams
from sim.models import SWA, ModelSpec


def sconv(
    spec: ModelSpec,
    w: dict,
    layer: int,
    kind: str,
    stream: str,
    x: torch.Tensor,
    step: Step,
    pools: Pools,
    ops,
) -> torch.Tensor:
    """x [T, width] through the layer's short conv of ``stream`` (identity on a model without sconv)."""
    if not spec.sconv_dims:
        return x
    lo, hi = sconv_streams(spec, kind)[stream]
    group = pools.layout.state_group_of(layer)
    p = f"{layer}.sconv_{stream}_"
    return causal_conv_with_state(
        x.reshape(x.shape[0], -1).contiguous(),
        step.rag,
        step.state_ids[group],
        step.ckpts[group],
        pools.conv[layer][:, :, lo:hi],
        w[p + "w"],
        w[p + "b"],
        ops.conv_silu,
    ).reshape(x.shape)


def attention(
    spec: ModelSpec, w: dict, layer: int, kind: str, h: torch.Tensor, step: Step, pools: Pools, ops: KernelOps
) -> torch.Tensor:
    T = h.shape[0]
    kv_heads, head_dim = kv_geometry(spec, kind)
    q_dim, kv_dim = spec.num_q_heads * head_dim, kv_heads * head_dim
    cos, sin = step.rope[head_dim]
    qkv = ops.matmul(h, w[f"{layer}.qkv"])
    q = apply_rope(qkv[:, :q_dim].reshape(T, spec.num_q_heads, head_dim), cos, sin)
    k = sconv(spec, w, layer, kind, "k", qkv[:, q_dim : q_dim + kv_dim], step, pools, ops)
    k = apply_rope(k.reshape(T, kv_heads, head_dim), cos, sin)
    group = pools.layout.attention_group_of(layer)
    pools.k[layer][step.new_slots[group]] = k
    if not k_is_v(spec, kind):  # else the pool's V tensor is its K tensor
        v = sconv(spec, w, layer, kind, "v", qkv[:, q_dim + kv_dim :], step, pools, ops)
        pools.v[layer][step.new_slots[group]] = v.reshape(T, kv_heads, head_dim)
    window = spec.window + pools.layout.window_offset if kind == SWA else 0
    o = ops.attention(q, pools.k[layer], pools.v[layer], step.rag, step.slots[group], window, head_dim**-0.5)
    out = ops.matmul(o.reshape(T, q_dim), w[f"{layer}.o"])
    return sconv(spec, w, layer, kind, "attn_out", out, step, pools, ops)


def mamba(
    spec: ModelSpec, w: dict, layer: int, h: torch.Tensor, step: Step, pools: Pools, ops: KernelOps
) -> torch.Tensor:
    p, heads = f"{layer}.", spec.mamba_num_heads
    inner, conv_dim = spec.mamba_inner_dim(), spec.mamba_conv_channels()
    bc = spec.mamba_num_groups * spec.mamba_state_dim
    group = pools.layout.state_group_of(layer)
    state_ids, ckpts = step.state_ids[group], step.ckpts[group]
    zxbcdt = ops.matmul(h, w[p + "in_proj"])
    xbc = causal_conv_with_state(
        zxbcdt[:, inner : inner + conv_dim].contiguous(),
        step.rag,
        state_ids,
        ckpts,
        pools.conv[layer],
        w[p + "conv_w"],
        w[p + "conv_b"],
        ops.conv_silu,
    )
    gates = inner + conv_dim
    beta = zxbcdt[:, gates + heads :] if spec.mamba_variant == "gdn" else None
    y = ops.ssm_scan(
        xbc[:, :inner],
        zxbcdt[:, gates : gates + heads],
        xbc[:, inner : inner + bc],
        xbc[:, inner + bc :],
        w[p + "A"],
        w[p + "D"],
        w[p + "dt_bias"],
        pools.ssm[layer],
        step.rag,
        state_ids,
        ckpts,
        beta,
    )
    return ops.matmul(ops.silu_mul(zxbcdt[:, :inner], y), w[p + "out_proj"])
