"""A hybrid FULL / SWA / MAMBA language model with deterministic random weights, built from a ModelSpec.

Each layer: RMSNorm -> mixer -> residual -> RMSNorm -> SiLU-gated MLP -> residual; then a final RMSNorm
and the LM head. Mixers: FULL attention with RoPE, SWA attention with RoPE (window `spec.window`), or a
Mamba2-style MAMBA mixer (in_proj -> short conv + SiLU -> SSD scan -> y * silu(z) -> out_proj, one B/C
group). Every op keeps a token's bits independent of its batch, so a token's logits are the same whether
its sequence ran in one pass, in chunks, token by token or resumed from a checkpoint.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from executor.batch import ForwardBatch, ForwardItem
from executor.kernels.conv import causal_conv_with_state
from executor.kernels.ops import KernelOps, get_ops
from executor.kernels.ragged import Ragged, SlotTable
from executor.kernels.rope import RopeTable, apply_rope
from executor.pools import Pools, check_supported
from sim.models import FULL, MAMBA, SWA, ModelSpec

ROPE_THETA = 10000.0
NORM_EPS = 1e-6


def init_weights(spec: ModelSpec, seed: int) -> dict[str, torch.Tensor]:
    """All weights, drawn in a fixed order from one CPU generator (so identical on every device)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen) * scale

    def rand(n: int, lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, generator=gen)

    d, f = spec.d_model, spec.d_ff
    w = {"embed": randn(spec.vocab_size, d)}
    for i, kind in enumerate(spec.layer_kinds):
        p = f"{i}."
        w[p + "norm1"] = 1.0 + 0.1 * randn(d)
        if kind in (FULL, SWA):
            q_dim, kv_dim = spec.num_q_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
            w[p + "qkv"] = randn(q_dim + 2 * kv_dim, d, scale=d**-0.5)
            w[p + "o"] = randn(d, q_dim, scale=q_dim**-0.5)
        elif kind == MAMBA:
            heads, inner, conv_dim = spec.mamba_num_heads, spec.mamba_inner_dim(), spec.mamba_conv_channels()
            w[p + "in_proj"] = randn(inner + conv_dim + heads, d, scale=d**-0.5)
            w[p + "conv_w"] = randn(conv_dim, spec.mamba_conv_kernel, scale=spec.mamba_conv_kernel**-0.5)
            w[p + "conv_b"] = 0.1 * randn(conv_dim)
            dt = torch.exp(rand(heads, math.log(1e-3), math.log(1e-1)))
            w[p + "dt_bias"] = dt + torch.log(-torch.expm1(-dt))  # softplus(dt_bias) = dt
            w[p + "A"] = -rand(heads, 1.0, 16.0)
            w[p + "D"] = 1.0 + 0.1 * randn(heads)
            w[p + "out_proj"] = randn(d, inner, scale=inner**-0.5)
        else:
            raise ValueError(f"{spec.name}: layer {i} has unknown kind {kind!r}")
        w[p + "norm2"] = 1.0 + 0.1 * randn(d)
        w[p + "gate_up"] = randn(2 * f, d, scale=d**-0.5)
        w[p + "down"] = randn(d, f, scale=f**-0.5)
    w["final_norm"] = 1.0 + 0.1 * randn(d)
    w["lm_head"] = randn(spec.vocab_size, d, scale=d**-0.5)
    return w


_FP32_WEIGHTS = ("dt_bias", "A", "D")  # scan parameters stay fp32 like the SSM state


class HybridModel:
    def __init__(
        self,
        spec: ModelSpec,
        seed: int = 0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        check_supported(spec)
        self.spec, self.seed, self.device, self.dtype = spec, seed, torch.device(device), dtype
        self.w = {
            name: t.to(device=self.device, dtype=torch.float32 if name.endswith(_FP32_WEIGHTS) else dtype)
            for name, t in init_weights(spec, seed).items()
        }
        self.rope = RopeTable(spec.head_dim, ROPE_THETA)

    def map_token_ids(self, ids: np.ndarray) -> torch.Tensor:
        """Trace token ids (non-negative 63-bit) -> vocab ids, as a CPU int64 tensor."""
        ids = np.asarray(ids)
        if ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0):
            raise ValueError("map_token_ids: ids must be non-negative integers")
        return torch.from_numpy(np.ascontiguousarray(ids.astype(np.int64) % self.spec.vocab_size))

    def forward(
        self, batch: ForwardBatch | list[ForwardItem], pools: Pools, kernels: str = "triton"
    ) -> list[torch.Tensor]:
        """Run one step; returns per item the float32 logits [end - logits_from, vocab]."""
        batch = batch if isinstance(batch, ForwardBatch) else ForwardBatch(list(batch))
        self._check(batch, pools)
        ops, step = get_ops(kernels), _Step(batch, self)
        x = self.w["embed"][step.token_ids]
        for layer, kind in enumerate(self.spec.layer_kinds):
            h = ops.rmsnorm(x, self.w[f"{layer}.norm1"], NORM_EPS)
            mixer = self._mamba if kind == MAMBA else self._attention
            x = x + mixer(layer, kind, h, step, pools, ops)
            h = ops.rmsnorm(x, self.w[f"{layer}.norm2"], NORM_EPS)
            x = x + self._mlp(layer, h, ops)
        rows = [torch.as_tensor(r, device=self.device) for r in batch.logit_rows()]
        h = ops.rmsnorm(x[torch.cat(rows)], self.w["final_norm"], NORM_EPS)
        logits = ops.matmul(h, self.w["lm_head"]).float()
        return list(torch.split(logits, [len(r) for r in rows]))

    def _check(self, batch: ForwardBatch, pools: Pools) -> None:
        if pools.spec.layer_kinds != self.spec.layer_kinds or pools.dtype != self.dtype:
            raise ValueError(
                f"pools were built for {pools.spec.name}/{pools.dtype}, model is "
                f"{self.spec.name}/{self.dtype}"
            )
        vocab = self.spec.vocab_size
        for i, it in enumerate(batch.items):
            if it.token_ids.min() < 0 or it.token_ids.max() >= vocab:
                raise ValueError(f"item {i}: token_ids must be vocab ids in [0, {vocab}); use map_token_ids")
        batch.check_fits(pools)

    def _attention(
        self, layer: int, kind: str, h: torch.Tensor, step: "_Step", pools: Pools, ops: KernelOps
    ) -> torch.Tensor:
        s, T = self.spec, h.shape[0]
        q_dim, kv_dim = s.num_q_heads * s.head_dim, s.num_kv_heads * s.head_dim
        qkv = ops.matmul(h, self.w[f"{layer}.qkv"])
        q = apply_rope(qkv[:, :q_dim].reshape(T, s.num_q_heads, s.head_dim), step.cos, step.sin)
        k = apply_rope(
            qkv[:, q_dim : q_dim + kv_dim].reshape(T, s.num_kv_heads, s.head_dim), step.cos, step.sin
        )
        v = qkv[:, q_dim + kv_dim :].reshape(T, s.num_kv_heads, s.head_dim)
        pools.k[layer][step.new_slots[kind]] = k
        pools.v[layer][step.new_slots[kind]] = v
        window = s.window if kind == SWA else 0
        o = ops.attention(
            q, pools.k[layer], pools.v[layer], step.rag, step.slots[kind], window, s.head_dim**-0.5
        )
        return ops.matmul(o.reshape(T, q_dim), self.w[f"{layer}.o"])

    def _mamba(
        self, layer: int, kind: str, h: torch.Tensor, step: "_Step", pools: Pools, ops: KernelOps
    ) -> torch.Tensor:
        s, w, p = self.spec, self.w, f"{layer}."
        inner, conv_dim, n = s.mamba_inner_dim(), s.mamba_conv_channels(), s.mamba_state_dim
        zxbcdt = ops.matmul(h, w[p + "in_proj"])
        xbc = causal_conv_with_state(
            zxbcdt[:, inner : inner + conv_dim].contiguous(),
            step.rag,
            step.state_ids,
            step.ckpts,
            pools.conv[layer],
            w[p + "conv_w"],
            w[p + "conv_b"],
            ops.conv_silu,
        )
        y = ops.ssm_scan(
            xbc[:, :inner],
            zxbcdt[:, inner + conv_dim :],
            xbc[:, inner : inner + n],
            xbc[:, inner + n :],
            w[p + "A"],
            w[p + "D"],
            w[p + "dt_bias"],
            pools.ssm[layer],
            step.rag,
            step.state_ids,
            step.ckpts,
        )
        return ops.matmul(ops.silu_mul(zxbcdt[:, :inner], y), w[p + "out_proj"])

    def _mlp(self, layer: int, h: torch.Tensor, ops: KernelOps) -> torch.Tensor:
        f = self.spec.d_ff
        gate_up = ops.matmul(h, self.w[f"{layer}.gate_up"])
        return ops.matmul(ops.silu_mul(gate_up[:, :f], gate_up[:, f:]), self.w[f"{layer}.down"])


class _Step:
    """Per-forward device tensors shared by the layers: token ids, RoPE rows, slot tables, state ids."""

    def __init__(self, batch: ForwardBatch, model: HybridModel):
        dev, self.rag = model.device, batch.rag
        self.token_ids = torch.as_tensor(batch.token_ids(), device=dev)
        self.cos, self.sin = model.rope.lookup(torch.as_tensor(self.rag.positions(), device=dev))
        self.slots = {kind: batch.slot_table(kind) for kind in (FULL, SWA)}
        self.new_slots = {
            kind: torch.as_tensor(_new_positions(t, self.rag), device=dev) for kind, t in self.slots.items()
        }
        self.state_ids, self.ckpts = batch.state_ids(), batch.checkpoints()


def _new_positions(table: SlotTable, rag: Ragged) -> np.ndarray:
    """Slots of every item's new positions [start, end), in packed token order."""
    parts = [table.flat[o + s : o + e] for o, s, e in zip(table.off, rag.starts, rag.ends, strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
