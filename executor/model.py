"""A hybrid FULL / SWA / MAMBA language model with deterministic random weights, built from a ModelSpec.

Each layer: RMSNorm -> mixer -> residual -> RMSNorm -> SiLU-gated MLP -> residual; then a final RMSNorm
and the LM head (``executor/mixers.py``, ``executor/weights.py``). Every preset's layer pattern runs as it
is: the kinds and their order, the window, FULL layers' own KV geometry (and K = V), the MAMBA variant and
its B/C groups, an sconv model's short-conv streams on every layer. Every op keeps a token's bits
independent of its batch, so a token's logits are the same whether its sequence ran in one pass, in chunks,
token by token or resumed from a checkpoint.
"""

from __future__ import annotations

import numpy as np
import torch

from executor import mixers
from executor.batch import ForwardBatch, ForwardItem
from executor.kernels.ops import KernelOps, get_ops
from executor.kernels.rope import RopeTable
from executor.pools import Pools
from executor.step import Step
from executor.support import check_supported
from executor.weights import init_weights, kv_geometry, mlp_width
from sim.models import FULL, MAMBA, SWA, ModelSpec

ROPE_THETA = 10000.0
NORM_EPS = 1e-6
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
        head_dims = {kv_geometry(spec, kind)[1] for kind in (FULL, SWA) if kind in spec.layer_kinds}
        self.ropes = {head_dim: RopeTable(head_dim, ROPE_THETA) for head_dim in sorted(head_dims)}

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
        ops, step = get_ops(kernels), Step(batch, pools.layout, self.ropes, self.device)
        spec, w = self.spec, self.w
        x = w["embed"][step.token_ids]
        for layer, kind in enumerate(spec.layer_kinds):
            h = ops.rmsnorm(x, w[f"{layer}.norm1"], NORM_EPS)
            if kind == MAMBA:
                x = x + mixers.mamba(spec, w, layer, h, step, pools, ops)
            else:
                x = x + mixers.attention(spec, w, layer, kind, h, step, pools, ops)
            h = ops.rmsnorm(x, w[f"{layer}.norm2"], NORM_EPS)
            mlp = self._mlp(layer, h, ops)
            x = x + mixers.sconv(spec, w, layer, kind, "mlp_out", mlp, step, pools, ops)
        rows = [torch.as_tensor(r, device=self.device) for r in batch.logit_rows()]
        h = ops.rmsnorm(x[torch.cat(rows)], w["final_norm"], NORM_EPS)
        logits = ops.matmul(h, w["lm_head"]).float()
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

    def _mlp(self, layer: int, h: torch.Tensor, ops: KernelOps) -> torch.Tensor:
        f = mlp_width(self.spec)
        gate_up = ops.matmul(h, self.w[f"{layer}.gate_up"])
        return ops.matmul(ops.silu_mul(gate_up[:, :f], gate_up[:, f:]), self.w[f"{layer}.down"])
