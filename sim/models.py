"""Model presets: the layer mix and sizes that set pool bytes, state bytes and FLOPs.

Shared by the simulator (pool sizing, cost model) and the executor (which builds the real network from
the same spec), so a preset is defined once.
"""
from __future__ import annotations

from dataclasses import dataclass

FULL, SWA, MAMBA = "full", "swa", "mamba"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layer_kinds: tuple[str, ...]  # one of FULL / SWA / MAMBA per layer, bottom to top
    d_model: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    window: int  # SWA window in tokens; 0 when the model has no SWA layer
    mamba_num_heads: int
    mamba_head_dim: int
    mamba_state_dim: int
    mamba_conv_kernel: int
    mamba_chunk: int  # the scan's chunk: prefill checkpoints land on multiples of it
    d_ff: int  # MLP hidden size (for MoE: one expert's)
    vocab_size: int
    num_experts: int = 1
    experts_per_token: int = 1
    dtype_bytes: int = 2

    def num_layers(self, kind: str) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def has_swa(self) -> bool:
        return self.num_layers(SWA) > 0

    @property
    def has_mamba(self) -> bool:
        return self.num_layers(MAMBA) > 0


def _mix(pattern: str, repeat: int) -> tuple[str, ...]:
    names = {"F": FULL, "S": SWA, "M": MAMBA}
    return tuple(names[c] for c in pattern) * repeat


MODELS: dict[str, ModelSpec] = {
    # the executor's CPU test model: every component, tiny sizes
    "tiny": ModelSpec(
        name="tiny", layer_kinds=_mix("SMF", 1), d_model=128, num_q_heads=4, num_kv_heads=2, head_dim=32,
        window=64, mamba_num_heads=4, mamba_head_dim=32, mamba_state_dim=16, mamba_conv_kernel=4,
        mamba_chunk=16, d_ff=256, vocab_size=512,
    ),
    # the executor's GPU model: a step takes milliseconds on an H200
    "small": ModelSpec(
        name="small", layer_kinds=_mix("SMSMSF", 4), d_model=1024, num_q_heads=16, num_kv_heads=4,
        head_dim=64, window=512, mamba_num_heads=16, mamba_head_dim=64, mamba_state_dim=64,
        mamba_conv_kernel=4, mamba_chunk=64, d_ff=4096, vocab_size=32768,
    ),
}


def get_model(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(sorted(MODELS))}")
    return MODELS[name]
