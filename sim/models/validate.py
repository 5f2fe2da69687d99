"""A model preset's sanity checks: every layer kind known, sizes positive, components consistent."""

from __future__ import annotations

from typing import Protocol

from sim.models.kinds import LAYER_KINDS, MAMBA

MAMBA_VARIANTS = ("mamba2", "gdn")


class ModelSpec(Protocol):
    """What the checks read of a model beyond its sizes (those are read by name): ``sim.models.ModelSpec``."""

    @property
    def name(self) -> str: ...
    @property
    def layer_kinds(self) -> tuple[str, ...]: ...
    @property
    def num_q_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def experts_per_token(self) -> int: ...
    @property
    def window(self) -> int: ...
    @property
    def mamba_chunk(self) -> int: ...
    @property
    def mamba_conv_kernel(self) -> int: ...
    @property
    def mamba_num_heads(self) -> int: ...
    @property
    def mamba_head_dim(self) -> int: ...
    @property
    def mamba_state_dim(self) -> int: ...
    @property
    def has_swa(self) -> bool: ...
    @property
    def has_mamba(self) -> bool: ...
    @property
    def sconv_dims(self) -> tuple[int, ...]: ...
    @property
    def mamba_variant(self) -> str: ...
    @property
    def mamba_num_groups(self) -> int: ...

    def full_kv_geometry(self) -> tuple[int, int]: ...
    def num_layers(self, kind: str) -> int: ...


def _fail(spec: ModelSpec, message: str) -> None:
    raise ValueError(f"model {spec.name!r}: {message}")


def validate(spec: ModelSpec) -> None:
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
    positive = (
        "d_model",
        "num_q_heads",
        "num_kv_heads",
        "head_dim",
        "d_ff",
        "vocab_size",
        "num_experts",
        "experts_per_token",
        "dtype_bytes",
        "mamba_num_groups",
        "mamba_ssm_dtype_bytes",
    )
    for knob in positive:
        if getattr(spec, knob) < 1:
            _fail(spec, f"{knob} must be >= 1, got {getattr(spec, knob)}")
    for knob in (
        "shared_d_ff",
        "full_num_kv_heads",
        "full_head_dim",
        "window",
        "mamba_num_heads",
        "mamba_head_dim",
        "mamba_state_dim",
        "mamba_conv_kernel",
        "mamba_chunk",
    ):
        if getattr(spec, knob) < 0:
            _fail(spec, f"{knob} must be >= 0, got {getattr(spec, knob)}")
    if spec.experts_per_token > spec.num_experts:
        _fail(spec, f"experts_per_token {spec.experts_per_token} exceeds num_experts {spec.num_experts}")
    for knob, kv_heads in (
        ("num_kv_heads", spec.num_kv_heads),
        ("full_num_kv_heads", spec.full_kv_geometry()[0]),
    ):
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
    if spec.mamba_variant not in MAMBA_VARIANTS:
        _fail(spec, f"mamba_variant must be one of {', '.join(MAMBA_VARIANTS)}, got {spec.mamba_variant!r}")
    if spec.mamba_num_heads % spec.mamba_num_groups:
        _fail(spec, f"mamba_num_heads {spec.mamba_num_heads} is not a multiple of mamba_num_groups")
    if any(dim < 1 for dim in spec.sconv_dims):
        _fail(spec, f"sconv_dims must all be >= 1, got {spec.sconv_dims}")
