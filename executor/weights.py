"""A model's random weights, drawn in a fixed order from one CPU generator (so identical on every device).

Per layer: the mixer's (attention: one fused q / k / v projection with its kind's KV geometry, no v where
``full_k_eq_v`` makes V equal K on FULL layers; MAMBA: in_proj to ``z | x B C | dt`` and, for GatedDeltaNet,
a per-head beta; the conv taps; dt_bias, A, D; out_proj), the short-conv streams of an sconv model
(k, v, attention output, MLP output), and the MLP. A mixture-of-experts preset runs one dense SiLU-gated MLP
of its active width (``experts_per_token * d_ff + shared_d_ff``): routing decides no cache state, so the
executor keeps each token's FLOPs, not its expert choice (docs/executor.md).
"""

from __future__ import annotations

import math

import torch

from sim.models import FULL, MAMBA, SWA, ModelSpec


def mlp_width(spec: ModelSpec) -> int:
    return spec.experts_per_token * spec.d_ff + spec.shared_d_ff if spec.is_moe else spec.d_ff


def kv_geometry(spec: ModelSpec, kind: str) -> tuple[int, int]:
    """(KV heads, head dim) of an attention layer of ``kind``."""
    return spec.full_kv_geometry() if kind == FULL else (spec.num_kv_heads, spec.head_dim)


def k_is_v(spec: ModelSpec, kind: str) -> bool:
    return kind == FULL and spec.full_k_eq_v


def sconv_streams(spec: ModelSpec, kind: str) -> dict[str, tuple[int, int]]:
    """Channel ranges ``[lo, hi)`` of an sconv layer's streams in its conv state: k and v of its own KV
    geometry (FULL's or SWA's slice of ``sconv_dims``), the attention output and the MLP output."""
    if not spec.sconv_dims:
        return {}
    edges = [0]
    for width in spec.sconv_dims:
        edges.append(edges[-1] + width)
    first = 0 if kind == FULL else 2
    kv_width = math.prod(kv_geometry(spec, kind))
    streams = {"k": (edges[first], edges[first + 1]), "v": (edges[first + 1], edges[first + 2])}
    streams |= {"attn_out": (edges[4], edges[5]), "mlp_out": (edges[5], edges[6])}
    wanted = {"k": kv_width, "v": kv_width, "attn_out": spec.d_model, "mlp_out": spec.d_model}
    for name, (lo, hi) in streams.items():
        if hi - lo != wanted[name]:
            raise ValueError(
                f"model {spec.name!r}: sconv stream {name} of a {kind} layer is {hi - lo} wide, the layer "
                f"makes {wanted[name]} (sconv_dims = k, v full; k, v local; attention out; MLP out)"
            )
    return streams


class _Draw:
    def __init__(self, seed: int):
        self.gen = torch.Generator().manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=self.gen) * scale

    def rand(self, n: int, lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, generator=self.gen)


def init_weights(spec: ModelSpec, seed: int) -> dict[str, torch.Tensor]:
    draw, d, f = _Draw(seed), spec.d_model, mlp_width(spec)
    w = {"embed": draw.randn(spec.vocab_size, d)}
    for i, kind in enumerate(spec.layer_kinds):
        p = f"{i}."
        w[p + "norm1"] = 1.0 + 0.1 * draw.randn(d)
        if kind in (FULL, SWA):
            w |= _attention(spec, kind, p, draw)
        elif kind == MAMBA:
            w |= _mamba(spec, p, draw)
        else:
            raise ValueError(f"{spec.name}: layer {i} has unknown kind {kind!r}")
        w[p + "norm2"] = 1.0 + 0.1 * draw.randn(d)
        w[p + "gate_up"] = draw.randn(2 * f, d, scale=d**-0.5)
        w[p + "down"] = draw.randn(d, f, scale=f**-0.5)
        for name, (lo, hi) in sconv_streams(spec, kind).items():
            w[p + f"sconv_{name}_w"] = draw.randn(hi - lo, spec.mamba_conv_kernel, scale=0.5)
            w[p + f"sconv_{name}_b"] = 0.1 * draw.randn(hi - lo)
    w["final_norm"] = 1.0 + 0.1 * draw.randn(d)
    w["lm_head"] = draw.randn(spec.vocab_size, d, scale=d**-0.5)
    return w


def _attention(spec: ModelSpec, kind: str, p: str, draw: _Draw) -> dict[str, torch.Tensor]:
    d = spec.d_model
    kv_heads, head_dim = kv_geometry(spec, kind)
    q_dim, kv_dim = spec.num_q_heads * head_dim, kv_heads * head_dim
    kv_tensors = 1 if k_is_v(spec, kind) else 2
    return {
        p + "qkv": draw.randn(q_dim + kv_tensors * kv_dim, d, scale=d**-0.5),
        p + "o": draw.randn(d, q_dim, scale=q_dim**-0.5),
    }


def _mamba(spec: ModelSpec, p: str, draw: _Draw) -> dict[str, torch.Tensor]:
    d, heads = spec.d_model, spec.mamba_num_heads
    inner, conv_dim = spec.mamba_inner_dim(), spec.mamba_conv_channels()
    gates = 2 * heads if spec.mamba_variant == "gdn" else heads  # dt (and GatedDeltaNet's beta)
    w = {
        p + "in_proj": draw.randn(inner + conv_dim + gates, d, scale=d**-0.5),
        p + "conv_w": draw.randn(conv_dim, spec.mamba_conv_kernel, scale=spec.mamba_conv_kernel**-0.5),
        p + "conv_b": 0.1 * draw.randn(conv_dim),
    }
    dt = torch.exp(draw.rand(heads, math.log(1e-3), math.log(1e-1)))
    w[p + "dt_bias"] = dt + torch.log(-torch.expm1(-dt))  # softplus(dt_bias) = dt
    w[p + "A"] = -draw.rand(heads, 1.0, 16.0)
    w[p + "D"] = 1.0 + 0.1 * draw.randn(heads)
    w[p + "out_proj"] = draw.randn(d, inner, scale=inner**-0.5)
    return w
