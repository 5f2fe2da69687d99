"""The rule that makes a model preset small enough for a CPU while keeping every property a cache depends on.

``--shrink auto`` (the default) applies it on a CPU and runs the preset at full size on a GPU; ``none`` never
applies it. The cache manager always runs the *preset* (its page and block sizes, pool bytes and vLLM groups
come from the real sizes); only the network the executor computes is shrunk, so every cache decision is the
full-size model's. What changes and what stays:

* layers: one period of the layer pattern (the shortest prefix that tiles it: gemma's ``SSSSSF``, Qwen's
  ``MMMF``): the kinds and their order stay, and so do vLLM's KV cache groups (every bucket's count and the
  group size scale alike, so each kind keeps its number of groups);
* attention: at most 4 query heads, the KV heads scaled with them (at least 1; FULL's own count apart from
  SWA's), head dims capped at 32 with FULL's own head dim kept in proportion; ``full_k_eq_v`` stays;
* MAMBA: at most 4 heads with the heads-per-group ratio kept (GatedDeltaNet's B/C groups), head dim at
  most 32, state dim at most 16; the variant, the conv kernel and the scan chunk stay;
* short-conv streams (Inkling): re-derived from the shrunk geometry (k, v of each geometry, attention out,
  MLP out);
* width 128, MLP 256 (one dense MLP; a mixture of experts runs its active width anyway), vocabulary 512;
* the window stays.
"""

from __future__ import annotations

from sim.models import ModelSpec

MAX_Q_HEADS, MAX_HEAD_DIM, MAX_MAMBA_HEADS, MAX_STATE_DIM = 4, 32, 4, 16
D_MODEL, D_FF, VOCAB = 128, 256, 512


def layer_period(kinds: tuple[str, ...]) -> tuple[str, ...]:
    return next(kinds[:n] for n in range(1, len(kinds) + 1) if kinds[:n] * (len(kinds) // n) == kinds)


def _heads(count: int, q_heads: int, q_kept: int) -> int:
    kept = max(1, count * q_kept // q_heads)
    return kept if q_kept % kept == 0 else 1


def shrink_model(spec: ModelSpec) -> ModelSpec:
    q_kept = min(spec.num_q_heads, MAX_Q_HEADS)
    head_dim = min(spec.head_dim, MAX_HEAD_DIM)
    knobs: dict[str, object] = dict(
        name=f"{spec.name} (shrunk)",
        layer_kinds=layer_period(spec.layer_kinds),
        d_model=min(spec.d_model, D_MODEL),
        num_q_heads=q_kept,
        num_kv_heads=_heads(spec.num_kv_heads, spec.num_q_heads, q_kept),
        head_dim=head_dim,
        d_ff=min(spec.d_ff, D_FF) if not spec.is_moe else D_FF,
        num_experts=1,
        experts_per_token=1,
        shared_d_ff=0,
        vocab_size=min(spec.vocab_size, VOCAB),
    )
    if spec.full_num_kv_heads:
        knobs["full_num_kv_heads"] = _heads(spec.full_num_kv_heads, spec.num_q_heads, q_kept)
    if spec.full_head_dim:
        knobs["full_head_dim"] = spec.full_head_dim * head_dim // spec.head_dim
    if spec.mamba_num_heads:
        heads = min(spec.mamba_num_heads, MAX_MAMBA_HEADS)
        groups = max(1, spec.mamba_num_groups * heads // spec.mamba_num_heads)
        knobs |= dict(
            mamba_num_heads=heads,
            mamba_num_groups=groups if heads % groups == 0 else 1,
            mamba_head_dim=min(spec.mamba_head_dim, MAX_HEAD_DIM),
            mamba_state_dim=min(spec.mamba_state_dim, MAX_STATE_DIM),
        )
    shrunk = spec.replace(**knobs)
    if spec.sconv_dims:
        full_kv = shrunk.full_kv_geometry()[0] * shrunk.full_kv_geometry()[1]
        local_kv = shrunk.num_kv_heads * shrunk.head_dim
        dims = (full_kv, full_kv, local_kv, local_kv, shrunk.d_model, shrunk.d_model)
        shrunk = shrunk.replace(sconv_dims=dims)
    return spec if shrunk.replace(name=spec.name) == spec else shrunk


def executed_model(spec: ModelSpec, shrink: str, device: str) -> ModelSpec:
    """The network ``execute`` computes for the preset ``spec``: ``shrink`` is ``auto`` (on a CPU) or ``none``."""
    if shrink not in ("auto", "none"):
        raise ValueError(f"--shrink must be auto or none, got {shrink!r}")
    return shrink_model(spec) if shrink == "auto" and device == "cpu" else spec
