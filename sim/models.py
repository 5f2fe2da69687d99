"""Model presets: the layer mix and sizes that set pool bytes, state bytes and FLOPs.

Shared by the simulator (pool sizing, cost model) and the executor (which builds the real network from
the same spec), so a preset is defined once.

Weights counted: every matmul a token runs (attention / mixer projections, the MLP or the routed and shared
experts, the router, the LM head). The embedding table is a gather of a few rows, so it is left out; norms,
biases and convolution taps are too small to matter. MLPs are gated (three matrices), as in every preset here.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass


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


FULL, SWA, MAMBA = "full", "swa", "mamba"
LAYER_KINDS = (FULL, SWA, MAMBA)
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

    def __post_init__(self) -> None:
        _validate(self)

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

    def replace(self, **knobs: object) -> ModelSpec:
        """A copy with knobs (e.g. `window`) overridden, validated like a preset."""
        known = {f.name for f in dataclasses.fields(self)}
        for knob in knobs:
            if knob not in known:
                raise ValueError(f"model {self.name!r}: unknown knob {knob!r}; known: {', '.join(sorted(known))}")
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
        return sum(self._mamba_params() if k == MAMBA else self._attention_params(k) for k in self.layer_kinds)

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
            raise ValueError(f"model {self.name!r}: weight_bytes_read needs num_tokens >= 1, got {num_tokens}")
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
            raise ValueError(f"model {self.name!r}: flops_per_token needs context_len >= 1, got {context_len}")
        full = self.attention_flops_per_attended_token(FULL) * context_len
        swa = self.attention_flops_per_attended_token(SWA) * min(context_len, self.window)
        return 2 * self.active_param_count() + self.state_flops_per_token() + full + swa


def _fail(spec: ModelSpec, message: str) -> None:
    raise ValueError(f"model {spec.name!r}: {message}")


def _validate(spec: ModelSpec) -> None:
    _validate_layers(spec)
    _validate_sizes(spec)
    _validate_components(spec)


def _validate_layers(spec: ModelSpec) -> None:
    if not spec.layer_kinds:
        _fail(spec, "layer_kinds is empty")
    for index, kind in enumerate(spec.layer_kinds):
        if kind not in LAYER_KINDS:
            _fail(spec, f"layer_kinds[{index}] is {kind!r}; expected one of {', '.join(LAYER_KINDS)}")


def _validate_sizes(spec: ModelSpec) -> None:
    positive = ("d_model", "num_q_heads", "num_kv_heads", "head_dim", "d_ff", "vocab_size", "num_experts",
                "experts_per_token", "dtype_bytes", "mamba_num_groups", "mamba_ssm_dtype_bytes")
    for knob in positive:
        if getattr(spec, knob) < 1:
            _fail(spec, f"{knob} must be >= 1, got {getattr(spec, knob)}")
    for knob in ("shared_d_ff", "full_num_kv_heads", "full_head_dim", "window", "mamba_num_heads",
                 "mamba_head_dim", "mamba_state_dim", "mamba_conv_kernel", "mamba_chunk"):
        if getattr(spec, knob) < 0:
            _fail(spec, f"{knob} must be >= 0, got {getattr(spec, knob)}")
    if spec.experts_per_token > spec.num_experts:
        _fail(spec, f"experts_per_token {spec.experts_per_token} exceeds num_experts {spec.num_experts}")
    for knob, kv_heads in (("num_kv_heads", spec.num_kv_heads), ("full_num_kv_heads", spec.full_kv_geometry()[0])):
        if spec.num_q_heads % kv_heads:
            _fail(spec, f"num_q_heads {spec.num_q_heads} is not a multiple of {knob} {kv_heads}")


def _validate_components(spec: ModelSpec) -> None:
    if spec.has_swa and spec.window < 1:
        _fail(spec, f"window must be > 0 when the model has SWA layers, got {spec.window}")
    if not spec.has_swa and spec.window != 0:
        _fail(spec, f"window is {spec.window} but the model has no SWA layer (use 0)")
    if spec.has_mamba and (spec.mamba_chunk < 1 or spec.mamba_conv_kernel < 1):
        _fail(spec, "mamba_chunk and mamba_conv_kernel must be >= 1 when the model has MAMBA state")
    if spec.num_layers(MAMBA) and min(spec.mamba_num_heads, spec.mamba_head_dim, spec.mamba_state_dim) < 1:
        _fail(spec, "mamba_num_heads, mamba_head_dim and mamba_state_dim must be >= 1 with MAMBA layers")
    if any(dim < 1 for dim in spec.sconv_dims):
        _fail(spec, f"sconv_dims must all be >= 1, got {spec.sconv_dims}")


def _mix(pattern: str, repeat: int) -> tuple[str, ...]:
    names = {"F": FULL, "S": SWA, "M": MAMBA}
    return tuple(names[c] for c in pattern) * repeat


_NO_MAMBA = dict(mamba_num_heads=0, mamba_head_dim=0, mamba_state_dim=0, mamba_conv_kernel=0, mamba_chunk=0)

MODELS: dict[str, ModelSpec] = {
    # the executor's CPU test model: every component, tiny sizes
    "tiny": ModelSpec(
        name="tiny", layer_kinds=_mix("SMF", 1), d_model=128, num_q_heads=4, num_kv_heads=2, head_dim=32,
        window=64, mamba_num_heads=4, mamba_head_dim=32, mamba_state_dim=16, mamba_conv_kernel=4,
        mamba_chunk=16, d_ff=256, vocab_size=512,
    ),
    # the same without MAMBA: a FULL + SWA model as FreeToken's SWA cache serves it
    "tiny-swa": ModelSpec(
        name="tiny-swa", layer_kinds=_mix("SF", 1), d_model=128, num_q_heads=4, num_kv_heads=2, head_dim=32,
        window=64, d_ff=256, vocab_size=512, **_NO_MAMBA,
    ),
    # the executor's GPU model: a step takes milliseconds on an H200
    "small": ModelSpec(
        name="small", layer_kinds=_mix("SMSMSF", 4), d_model=1024, num_q_heads=16, num_kv_heads=4,
        head_dim=64, window=512, mamba_num_heads=16, mamba_head_dim=64, mamba_state_dim=64,
        mamba_conv_kernel=4, mamba_chunk=64, d_ff=4096, vocab_size=32768,
    ),
    # SGLang 0.5.23 configs/inkling.py, InklingModelConfig defaults (the checkpoint's own config is not public):
    # 16 layers, hidden 1536, 12 q / 4 kv heads of 128, dense MLP 768, vocab 201024, sliding_window_size 512,
    # sconv_kernel_size 4. The class leaves local_layer_ids empty, so the 3 SWA : 1 FULL mix is ours. Every
    # layer's sconv state is (kernel-1) x [k, v (full geometry), k, v (local geometry), attn-out, mlp-out], as
    # mamba2_cache_params allocates it. mamba_chunk 128 is SGLang's grid at page 128 (max(chunk 64, page)).
    "inkling": ModelSpec(
        name="inkling", layer_kinds=_mix("SSSF", 4), d_model=1536, num_q_heads=12, num_kv_heads=4,
        head_dim=128, window=512, mamba_num_heads=0, mamba_head_dim=0, mamba_state_dim=0,
        mamba_conv_kernel=4, mamba_chunk=128, d_ff=768, vocab_size=201024,
        sconv_dims=(512, 512, 512, 512, 1536, 1536),
    ),
    # google/gemma-4-26B-A4B config.json (text_config): 30 layers = 5 x (5 sliding + 1 full), hidden 2816,
    # 16 q heads; sliding: 8 kv heads of 256, sliding_window 1024; full: num_global_key_value_heads 2 of
    # global_head_dim 512 with attention_k_eq_v; a dense MLP (intermediate_size 2112) beside 128 experts
    # (top_k_experts 8) of moe_intermediate_size 704; vocab 262144.
    "gemma-4-26b-a4b": ModelSpec(
        name="gemma-4-26b-a4b", layer_kinds=_mix("SSSSSF", 5), d_model=2816, num_q_heads=16,
        num_kv_heads=8, head_dim=256, window=1024, d_ff=704, vocab_size=262144, num_experts=128,
        experts_per_token=8, shared_d_ff=2112, full_num_kv_heads=2, full_head_dim=512, full_k_eq_v=True,
        **_NO_MAMBA,
    ),
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, full_attention_interval 4 (3 GatedDeltaNet : 1
    # full), hidden 2048, 16 q / 2 kv heads of 256; GDN: 32 value heads of 128, 16 key heads of 128 (the
    # groups), linear_conv_kernel_dim 4; 512 experts (top 10) of 512 plus a shared expert of 512; vocab
    # 151936. mamba_chunk 64 is the FLA kernels' chunk. (The attention output gate is left out.)
    "qwen3-next": ModelSpec(
        name="qwen3-next", layer_kinds=_mix("MMMF", 12), d_model=2048, num_q_heads=16, num_kv_heads=2,
        head_dim=256, window=0, mamba_num_heads=32, mamba_head_dim=128, mamba_state_dim=128,
        mamba_conv_kernel=4, mamba_chunk=64, d_ff=512, vocab_size=151936, num_experts=512,
        experts_per_token=10, shared_d_ff=512, mamba_num_groups=16,
    ),
    # Qwen/Qwen3.5-4B (Qwen3_5ForConditionalGeneration, text config): 32 layers, full_attention_interval 4 (3
    # GatedDeltaNet : 1 full, the first layer GDN), 16 q / 4 kv heads of 256; GDN: 32 value heads of 128, 16 key
    # heads of 128, linear_conv_kernel_dim 4, mamba_ssm_dtype float32 (so one GDN layer's state is conv (3, 8192)
    # bf16 + recurrent (32, 128, 128) fp32 = 2,146,304 bytes: vLLM derives block 528 from it, 576 on FlashInfer
    # GDN). Hidden 2560, MLP 9216, vocab 248320 set only the cost model. mamba_chunk 64: the FLA kernels' chunk.
    "qwen3.5-4b": ModelSpec(
        name="qwen3.5-4b", layer_kinds=_mix("MMMF", 8), d_model=2560, num_q_heads=16, num_kv_heads=4,
        head_dim=256, window=0, mamba_num_heads=32, mamba_head_dim=128, mamba_state_dim=128,
        mamba_conv_kernel=4, mamba_chunk=64, d_ff=9216, vocab_size=248320, mamba_num_groups=16,
    ),
    # openai/gpt-oss-20b config.json: 24 layers alternating sliding (even) / full (odd), sliding_window 128,
    # hidden 2880, 64 q / 8 kv heads of 64, 32 local experts (experts_per_token 4) of 2880, vocab 201088.
    # Counted as bf16; the published checkpoint's mxfp4 experts would stream about 4x fewer expert bytes.
    "gpt-oss-20b": ModelSpec(
        name="gpt-oss-20b", layer_kinds=_mix("SF", 12), d_model=2880, num_q_heads=64, num_kv_heads=8,
        head_dim=64, window=128, d_ff=2880, vocab_size=201088, num_experts=32, experts_per_token=4,
        **_NO_MAMBA,
    ),
}


def get_model(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(sorted(MODELS))}")
    return MODELS[name]
