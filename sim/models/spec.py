"""A model's spec: its layer mix and sizes, and the figures derived from them (pool bytes, state bytes, FLOPs).

Weights counted: every matmul a token runs (attention / mixer projections, the MLP or the routed and shared
experts, the router, the LM head). The embedding table is a gather of a few rows, so it is left out; norms,
biases and convolution taps are too small to matter. MLPs are gated (three matrices), as in every preset here.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from sim.models.kinds import FULL, MAMBA, SWA
from sim.models.validate import validate


def _memo(method):
    """Cache a derived figure on the (frozen) spec: the cost model asks for them on every engine step."""
    key = "_memo_" + method.__name__

    @functools.wraps(method)
    def cached(self, *args):
        table = self.__dict__.setdefault(key, {})
        if args not in table:
            table[args] = method(self, *args)
        return table[args]

    return cached


_MLP_MATRICES = 3  # gate, up, down


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
    # a dense MLP every token runs beside the routed experts (Gemma-4's dense path, Qwen3-Next's shared expert)
    shared_d_ff: int = 0
    # FULL layers' own KV geometry where it differs from the SWA layers' (Gemma-4 global layers); 0 = the same
    full_num_kv_heads: int = 0
    full_head_dim: int = 0
    full_k_eq_v: bool = False  # FULL layers keep one tensor for K and V (Gemma-4 attention_k_eq_v)
    # B/C groups (GatedDeltaNet: key heads); the conv runs over heads*head_dim + 2*groups*state_dim channels
    mamba_num_groups: int = 1
    # SGLang keeps SSM states in fp32 unless told otherwise (configs/mamba_utils.py: mamba2_state_dtype)
    mamba_ssm_dtype_bytes: int = 4
    # short-conv streams that every layer carries (Inkling's sconv); their (kernel-1)-token windows make up
    # the MAMBA component's state for a model that has no MAMBA layer of its own
    sconv_dims: tuple[int, ...] = ()
    # the MAMBA layers' recurrence: "mamba2" (SSD: a decayed outer-product update) or "gdn" (GatedDeltaNet: a
    # decayed delta-rule update on L2-normalised keys); the state's shape and bytes are the same formula
    mamba_variant: str = "mamba2"

    def __post_init__(self) -> None:
        validate(self)

    @_memo
    def num_layers(self, kind: str) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def has_swa(self) -> bool:
        return self.num_layers(SWA) > 0

    @property
    def has_mamba(self) -> bool:
        return self.num_layers(MAMBA) > 0 or bool(self.sconv_dims)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    def replace(self, **knobs: Any) -> ModelSpec:
        """A copy with knobs (e.g. `window`) overridden, validated like a preset."""
        known = {f.name for f in dataclasses.fields(self)}
        for knob in knobs:
            if knob not in known:
                raise ValueError(
                    f"model {self.name!r}: unknown knob {knob!r}; known: {', '.join(sorted(known))}"
                )
        return dataclasses.replace(self, **knobs)

    # ---- per-token and per-state bytes ----

    def full_kv_geometry(self) -> tuple[int, int]:
        """(KV heads, head dim) of the FULL layers."""
        return self.full_num_kv_heads or self.num_kv_heads, self.full_head_dim or self.head_dim

    @_memo
    def full_kv_bytes_per_token(self) -> int:
        kv_heads, head_dim = self.full_kv_geometry()
        num_tensors = 1 if self.full_k_eq_v else 2
        return self.num_layers(FULL) * num_tensors * kv_heads * head_dim * self.dtype_bytes

    @_memo
    def swa_kv_bytes_per_token(self) -> int:
        return self.num_layers(SWA) * 2 * self.num_kv_heads * self.head_dim * self.dtype_bytes

    def mamba_inner_dim(self) -> int:
        return self.mamba_num_heads * self.mamba_head_dim

    def mamba_conv_channels(self) -> int:
        return self.mamba_inner_dim() + 2 * self.mamba_num_groups * self.mamba_state_dim

    @_memo
    def mamba_state_bytes(self) -> int:
        """One request's MAMBA state (one checkpoint): SSM + conv state of every MAMBA layer, plus sconv windows."""
        conv_len = max(self.mamba_conv_kernel - 1, 0)  # a causal conv needs the last kernel-1 inputs
        ssm = self.mamba_num_heads * self.mamba_head_dim * self.mamba_state_dim * self.mamba_ssm_dtype_bytes
        conv = conv_len * self.mamba_conv_channels() * self.dtype_bytes
        sconv = conv_len * sum(self.sconv_dims) * self.dtype_bytes
        return self.num_layers(MAMBA) * (ssm + conv) + len(self.layer_kinds) * sconv

    # ---- parameters ----

    def _attention_params(self, kind: str) -> int:
        kv_heads, head_dim = self.full_kv_geometry() if kind == FULL else (self.num_kv_heads, self.head_dim)
        kv_tensors = 1 if kind == FULL and self.full_k_eq_v else 2
        q_and_o = 2 * self.d_model * self.num_q_heads * head_dim
        return q_and_o + kv_tensors * self.d_model * kv_heads * head_dim

    def _mamba_params(self) -> int:
        # in_proj makes x and z (inner each), B and C (groups*state each) and two per-head gates (dt, or a and b)
        gates = 2 * self.mamba_num_heads
        in_proj = self.d_model * (self.mamba_inner_dim() + self.mamba_conv_channels() + gates)
        return in_proj + self.mamba_inner_dim() * self.d_model

    def _mixer_params(self) -> int:
        return sum(
            self._mamba_params() if k == MAMBA else self._attention_params(k) for k in self.layer_kinds
        )

    def _expert_params(self) -> int:
        return _MLP_MATRICES * self.d_model * self.d_ff

    def _dense_mlp_params(self) -> int:
        router = self.d_model * self.num_experts if self.is_moe else 0
        return _MLP_MATRICES * self.d_model * self.shared_d_ff + router

    def _params_with_experts(self, num_experts: float) -> float:
        per_layer_mlp = num_experts * self._expert_params() + self._dense_mlp_params()
        lm_head = self.vocab_size * self.d_model
        return self._mixer_params() + len(self.layer_kinds) * per_layer_mlp + lm_head

    @_memo
    def active_param_count(self) -> int:
        """Weights one token's forward multiplies by (MoE: its experts_per_token experts only)."""
        return int(self._params_with_experts(self.experts_per_token))

    def param_bytes(self) -> int:
        return self.active_param_count() * self.dtype_bytes

    def expected_experts_touched(self, num_tokens: int) -> float:
        """Distinct experts per layer that num_tokens tokens route to, for uniform routing."""
        miss_one = 1.0 - self.experts_per_token / self.num_experts
        return self.num_experts * (1.0 - miss_one**num_tokens)

    @_memo
    def weight_bytes_read(self, num_tokens: int) -> int:
        """Weight bytes one step streams from memory: a MoE step reads every expert any of its tokens uses."""
        if num_tokens < 1:
            raise ValueError(
                f"model {self.name!r}: weight_bytes_read needs num_tokens >= 1, got {num_tokens}"
            )
        if not self.is_moe:
            return self.param_bytes()
        return round(self._params_with_experts(self.expected_experts_touched(num_tokens)) * self.dtype_bytes)

    # ---- FLOPs ----

    @_memo
    def attention_flops_per_attended_token(self, kind: str) -> int:
        """FLOPs one query token spends per key it attends to, over all layers of kind (QK^T and PV)."""
        head_dim = self.full_kv_geometry()[1] if kind == FULL else self.head_dim
        return self.num_layers(kind) * 2 * 2 * self.num_q_heads * head_dim

    @_memo
    def state_flops_per_token(self) -> int:
        """Per-token recurrent cost: the state is decayed, written and read (2 FLOPs each), plus the convs."""
        ssm = 3 * 2 * self.mamba_num_heads * self.mamba_head_dim * self.mamba_state_dim
        conv = 2 * self.mamba_conv_kernel * self.mamba_conv_channels()
        sconv = 2 * self.mamba_conv_kernel * sum(self.sconv_dims)
        return self.num_layers(MAMBA) * (ssm + conv) + len(self.layer_kinds) * sconv

    def flops_per_token(self, context_len: int) -> int:
        """FLOPs of one token that attends to context_len tokens (itself included)."""
        if context_len < 1:
            raise ValueError(
                f"model {self.name!r}: flops_per_token needs context_len >= 1, got {context_len}"
            )
        full = self.attention_flops_per_attended_token(FULL) * context_len
        swa = self.attention_flops_per_attended_token(SWA) * min(context_len, self.window)
        return 2 * self.active_param_count() + self.state_flops_per_token() + full + swa
