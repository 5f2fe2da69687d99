"""vLLM 0.33.0's block size for a hybrid model (Platform._align_hybrid_block_size, the real function) on
Qwen3.5-4B's shapes: 528 with the Triton GDN prefill, 576 when FlashInfer's internal checkpoints align blocks
to 64 (Hopper). The model, its registry entry and the attention backend are stand-ins carrying only what the
function reads; the arithmetic is vLLM's."""
from __future__ import annotations

from importlib.util import find_spec
from types import SimpleNamespace
from unittest import mock

import pytest

from conformance.scenario import EngineConfig

pytestmark = pytest.mark.skipif(find_spec("vllm") is None, reason="vLLM 0.33.0 is not installed "
                                "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)")

# Qwen/Qwen3.5-4B: full attention 4 KV heads of 256 (bf16); GatedDeltaNet 16 key heads and 32 value heads of
# 128, conv kernel 4, recurrent state in float32 (mamba_ssm_dtype), conv state in the model dtype (bf16).
KV_HEADS, HEAD_DIM = 4, 256
GDN = dict(num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128, conv_kernel_size=4)


def _derived_block_size(checkpoint_alignment: int | None) -> tuple[int, int, int]:
    import torch
    import vllm.model_executor.layers.mamba.abstract as mamba_abstract
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backend import MultipleOf

    from conformance.engines import vllm_build

    class FlashAttention:
        get_supported_kernel_block_sizes = staticmethod(lambda: [MultipleOf(16)])
        customize_spec = staticmethod(lambda spec: spec)

    class Qwen35:
        get_mamba_state_shape_from_config = staticmethod(
            lambda vllm_config: MambaStateShapeCalculator.gated_delta_net_state_shape(1, **GDN))
        get_mamba_state_dtype_from_config = staticmethod(lambda vllm_config: (torch.bfloat16, torch.float32))

    config = EngineConfig("full+mamba", 16, 0, 64, 64, 8192, 128, 0, 0, 0, num_blocks=100, max_model_len=1024)
    vllm_config = vllm_build.vllm_config(config)  # block size 16: vLLM's default before alignment
    model = SimpleNamespace(dtype=torch.bfloat16, use_mla=False, architecture="Qwen3_5ForCausalLM",
                            get_num_kv_heads=lambda parallel: KV_HEADS, get_head_size=lambda: HEAD_DIM)
    object.__setattr__(vllm_config, "model_config", model)
    with mock.patch.object(ModelRegistry, "resolve_model_cls", lambda *args, **kwargs: (Qwen35, "")), \
            mock.patch.object(Platform, "_find_non_ssm_backends", classmethod(lambda cls, v: [FlashAttention])), \
            mock.patch.object(mamba_abstract, "get_mamba_prefill_checkpoint_alignment",
                              lambda vllm_config: checkpoint_alignment):
        Platform._align_hybrid_block_size(vllm_config, FlashAttention)
    cache = vllm_config.cache_config
    return cache.block_size, cache.mamba_block_size, cache.mamba_page_size_padded


def test_qwen35_4b_block_is_528_with_triton_gdn():
    # attention page 4 * 256 * 2 (K, V) * 2 bytes = 4096 bytes a token; GDN state (3, 8192) bf16 +
    # (32, 128, 128) fp32 = 2,146,304 bytes; 16 * cdiv(2146304, 16 * 4096) = 16 * 33 = 528
    assert _derived_block_size(None) == (528, 528, 528 * 4096)


def test_qwen35_4b_block_is_576_with_flashinfer_checkpoints():
    # alignment lcm(16, 64) = 64: 64 * cdiv(2146304, 64 * 4096) = 64 * 9 = 576
    assert _derived_block_size(64) == (576, 576, 576 * 4096)
