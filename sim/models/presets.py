"""The model presets by name: the layer mixes and sizes of the models the experiments use."""

from __future__ import annotations

from typing import Any

from sim.models.kinds import FULL, MAMBA, SWA
from sim.models.spec import ModelSpec


def _mix(pattern: str, repeat: int) -> tuple[str, ...]:
    names = {"F": FULL, "S": SWA, "M": MAMBA}
    return tuple(names[c] for c in pattern) * repeat


_NO_MAMBA: dict[str, Any] = dict(
    mamba_num_heads=0, mamba_head_dim=0, mamba_state_dim=0, mamba_conv_kernel=0, mamba_chunk=0
)

MODELS: dict[str, ModelSpec] = {
    # the executor's CPU test model: every component, tiny sizes
    "tiny": ModelSpec(
        name="tiny",
        layer_kinds=_mix("SMF", 1),
        d_model=128,
        num_q_heads=4,
        num_kv_heads=2,
        head_dim=32,
        window=64,
        mamba_num_heads=4,
        mamba_head_dim=32,
        mamba_state_dim=16,
        mamba_conv_kernel=4,
        mamba_chunk=16,
        d_ff=256,
        vocab_size=512,
    ),
    # the same without MAMBA: a FULL + SWA model as FreeToken's SWA cache serves it
    "tiny-swa": ModelSpec(
        name="tiny-swa",
        layer_kinds=_mix("SF", 1),
        d_model=128,
        num_q_heads=4,
        num_kv_heads=2,
        head_dim=32,
        window=64,
        d_ff=256,
        vocab_size=512,
        **_NO_MAMBA,
    ),
    # the executor's GPU model: a step takes milliseconds on an H200
    "small": ModelSpec(
        name="small",
        layer_kinds=_mix("SMSMSF", 4),
        d_model=1024,
        num_q_heads=16,
        num_kv_heads=4,
        head_dim=64,
        window=512,
        mamba_num_heads=16,
        mamba_head_dim=64,
        mamba_state_dim=64,
        mamba_conv_kernel=4,
        mamba_chunk=64,
        d_ff=4096,
        vocab_size=32768,
    ),
    # SGLang 0.5.23 configs/inkling.py, InklingModelConfig defaults (the checkpoint's own config is not public):
    # 16 layers, hidden 1536, 12 q / 4 kv heads of 128, dense MLP 768, vocab 201024, sliding_window_size 512,
    # sconv_kernel_size 4. The class leaves local_layer_ids empty, so the 3 SWA : 1 FULL mix is ours. Every
    # layer's sconv state is (kernel-1) x [k, v (full geometry), k, v (local geometry), attn-out, mlp-out], as
    # mamba2_cache_params allocates it. mamba_chunk 128 is SGLang's grid at page 128 (max(chunk 64, page)).
    "inkling": ModelSpec(
        name="inkling",
        layer_kinds=_mix("SSSF", 4),
        d_model=1536,
        num_q_heads=12,
        num_kv_heads=4,
        head_dim=128,
        window=512,
        mamba_num_heads=0,
        mamba_head_dim=0,
        mamba_state_dim=0,
        mamba_conv_kernel=4,
        mamba_chunk=128,
        d_ff=768,
        vocab_size=201024,
        sconv_dims=(512, 512, 512, 512, 1536, 1536),
    ),
    # google/gemma-4-26B-A4B config.json (text_config): 30 layers = 5 x (5 sliding + 1 full), hidden 2816,
    # 16 q heads; sliding: 8 kv heads of 256, sliding_window 1024; full: num_global_key_value_heads 2 of
    # global_head_dim 512 with attention_k_eq_v; a dense MLP (intermediate_size 2112) beside 128 experts
    # (top_k_experts 8) of moe_intermediate_size 704; vocab 262144.
    "gemma-4-26b-a4b": ModelSpec(
        name="gemma-4-26b-a4b",
        layer_kinds=_mix("SSSSSF", 5),
        d_model=2816,
        num_q_heads=16,
        num_kv_heads=8,
        head_dim=256,
        window=1024,
        d_ff=704,
        vocab_size=262144,
        num_experts=128,
        experts_per_token=8,
        shared_d_ff=2112,
        full_num_kv_heads=2,
        full_head_dim=512,
        full_k_eq_v=True,
        **_NO_MAMBA,
    ),
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, full_attention_interval 4 (3 GatedDeltaNet : 1
    # full), hidden 2048, 16 q / 2 kv heads of 256; GDN: 32 value heads of 128, 16 key heads of 128 (the
    # groups), linear_conv_kernel_dim 4; 512 experts (top 10) of 512 plus a shared expert of 512; vocab
    # 151936. mamba_chunk 64 is the FLA kernels' chunk. (The attention output gate is left out.)
    "qwen3-next": ModelSpec(
        name="qwen3-next",
        layer_kinds=_mix("MMMF", 12),
        d_model=2048,
        num_q_heads=16,
        num_kv_heads=2,
        head_dim=256,
        window=0,
        mamba_num_heads=32,
        mamba_head_dim=128,
        mamba_state_dim=128,
        mamba_conv_kernel=4,
        mamba_chunk=64,
        d_ff=512,
        vocab_size=151936,
        num_experts=512,
        experts_per_token=10,
        shared_d_ff=512,
        mamba_num_groups=16,
        mamba_variant="gdn",
    ),
    # Qwen/Qwen3.5-4B (Qwen3_5ForConditionalGeneration, text config): 32 layers, full_attention_interval 4 (3
    # GatedDeltaNet : 1 full, the first layer GDN), 16 q / 4 kv heads of 256; GDN: 32 value heads of 128, 16 key
    # heads of 128, linear_conv_kernel_dim 4, mamba_ssm_dtype float32 (so one GDN layer's state is conv (3, 8192)
    # bf16 + recurrent (32, 128, 128) fp32 = 2,146,304 bytes: vLLM derives block 528 from it, 576 on FlashInfer
    # GDN). Hidden 2560, MLP 9216, vocab 248320 set only the cost model. mamba_chunk 64: the FLA kernels' chunk.
    "qwen3.5-4b": ModelSpec(
        name="qwen3.5-4b",
        layer_kinds=_mix("MMMF", 8),
        d_model=2560,
        num_q_heads=16,
        num_kv_heads=4,
        head_dim=256,
        window=0,
        mamba_num_heads=32,
        mamba_head_dim=128,
        mamba_state_dim=128,
        mamba_conv_kernel=4,
        mamba_chunk=64,
        d_ff=9216,
        vocab_size=248320,
        mamba_num_groups=16,
        mamba_variant="gdn",
    ),
    # openai/gpt-oss-20b config.json: 24 layers alternating sliding (even) / full (odd), sliding_window 128,
    # hidden 2880, 64 q / 8 kv heads of 64, 32 local experts (experts_per_token 4) of 2880, vocab 201088.
    # Counted as bf16; the published checkpoint's mxfp4 experts would stream about 4x fewer expert bytes.
    "gpt-oss-20b": ModelSpec(
        name="gpt-oss-20b",
        layer_kinds=_mix("SF", 12),
        d_model=2880,
        num_q_heads=64,
        num_kv_heads=8,
        head_dim=64,
        window=128,
        d_ff=2880,
        vocab_size=201088,
        num_experts=32,
        experts_per_token=4,
        **_NO_MAMBA,
    ),
}


def get_model(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(sorted(MODELS))}")
    return MODELS[name]
