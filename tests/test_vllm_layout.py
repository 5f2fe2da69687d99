"""vLLM's layout of a model in its block pool (sim/cache/blocks/layout.py, startup.py, sizing.py, defaults.py):
groups, the derived block size, the start-up minimum and the pool size."""
from __future__ import annotations

import pytest

from conformance.compare import model_for
from conformance.generate import generate
from conformance.generate_pools import vllm_blocks, vllm_min_blocks
from sim.cache.blocks.defaults import settle_for_gpu
from sim.cache.blocks.layout import group_kinds, hybrid_block_size, layout_for, mamba_layer_bytes
from sim.cache.blocks.sizing import shared_pool_sizes
from sim.cache.blocks.startup import check_config, settle_max_model_len
from sim.engines.registry import make_policy
from sim.models import get_model

QWEN = get_model("qwen3.5-4b")


def test_qwen35_4b_derives_528_with_triton_gdn_and_576_with_flashinfer():
    """vllm-rules.md section 2: attention 4 KV heads x 256 x 2 x 2 bytes = 4096 per token; one GDN layer's
    state = conv (3, 8192) bf16 + recurrent (32, 128, 128) fp32 = 2,146,304 bytes."""
    assert mamba_layer_bytes(QWEN) == 3 * 8192 * 2 + 32 * 128 * 128 * 4 == 2_146_304
    assert hybrid_block_size(QWEN, 16, prefill_checkpoints=False) == 16 * 33 == 528
    assert hybrid_block_size(QWEN, 16, prefill_checkpoints=True) == 64 * 9 == 576
    assert hybrid_block_size(QWEN, 1024, prefill_checkpoints=False) == 1024  # --block-size is a floor


def test_other_models_block_sizes_and_groups():
    assert hybrid_block_size(get_model("qwen3-next"), 16, False) == 1056  # 2 KV heads: vllm#42317's 1056
    gemma = layout_for(get_model("gemma-4-26b-a4b"), 16, 1024, True)
    assert gemma.group_kinds == ("swa",) * 5 + ("full",) and gemma.checkpoint_blocks == 0
    # unify_kv_cache_spec_page_size: a SWA layer stores 8 KV heads of 256 (8192 bytes a token), a FULL layer 2 of
    # 512 (4096), so FULL blocks hold 32 tokens beside SWA's 16; the scheduler block is their lcm, the hash their gcd
    assert (gemma.block_of("full"), gemma.block_of("swa"), gemma.block_size, gemma.hash_block) == (32, 16, 32, 16)
    assert gemma.swa_need == 64  # cdiv(1023, 16)
    assert group_kinds(QWEN) == ("mamba", "mamba", "mamba", "full")  # 24 GDN + 8 full, the first layer GDN
    assert set(group_kinds(get_model("inkling"))) == {"swa", "full", "mamba"}


def test_the_start_up_minimum_is_the_generators_checked_one():
    """generate.vllm_min_blocks is held to vLLM's own start-up check by tests/conformance/test_vllm_engine.py."""
    for seed in range(40):
        scenario = generate("vllm", seed, pressure=True)
        config = scenario.config
        layout = layout_for(model_for(scenario), config.page_size, config.window, config.prefill_checkpoints)
        assert (layout.block_of("full"), layout.block_of("swa")) == vllm_blocks(config)
        assert layout.min_blocks(config.max_model_len, 2 * config.chunked_prefill_size) == vllm_min_blocks(config)


def test_a_pool_below_the_minimum_is_refused_in_vllms_terms_and_an_unset_length_is_the_longest_served():
    policy = make_policy("vllm", prefill_checkpoints=False, max_model_len=32768)
    layout = layout_for(QWEN, 16, 0, False)
    need = layout.min_blocks(32768, 2 * 8192)
    assert need == 1 + 63 + 3 * 2
    with pytest.raises(ValueError, match="max seq len 32768, 70 blocks"):
        settle_max_model_len(layout, need - 1, policy)
    assert settle_max_model_len(layout, need, policy) == 32768
    longest = settle_max_model_len(layout, need, make_policy("vllm", prefill_checkpoints=False))
    assert layout.min_blocks(longest, 16384) <= need < layout.min_blocks(longest + 1, 16384)


@pytest.mark.parametrize(("knobs", "message"), [
    ({"page_size": 24}, "kernel block 16"),
    ({"retention_interval": 1000}, "multiple of scheduler_block_size 528"),
])
def test_vllm_refuses_what_it_cannot_start_with(knobs, message):
    policy = make_policy("vllm", prefill_checkpoints=False, **knobs)
    with pytest.raises(ValueError, match=message):
        check_config(layout_for(QWEN, policy.page_size, 0, False), policy, QWEN)


def test_a_retention_interval_needs_a_swa_or_mamba_group():
    full_only = get_model("tiny").replace(layer_kinds=("full",), window=0)
    policy = make_policy("vllm", retention_interval=32)
    with pytest.raises(ValueError, match="neither sliding-window nor Mamba"):
        check_config(layout_for(full_only, 16, 0, False), policy, full_only)


def test_pool_from_tokens_and_from_memory():
    policy = make_policy("vllm", prefill_checkpoints=False)
    assert shared_pool_sizes(QWEN, policy, 1 << 30, 10_000).blocks == 10_000 // 528 + 1
    per_block = 8 * 528 * 4096  # 8 layers per group, each a 528-token page of 4096 bytes a token
    assert shared_pool_sizes(QWEN, policy, 40 << 30, None).blocks == (40 << 30) // per_block


def test_gpu_defaults_follow_vllm_serve_and_keep_what_the_user_gave():
    policy = make_policy("vllm")
    h200 = settle_for_gpu(policy, "h200", set())
    assert (h200.chunked_prefill_size, h200.max_running_requests, h200.own.prefill_checkpoints) == (8192, 1024, True)
    small = settle_for_gpu(policy, "rtx4090", set())
    assert (small.chunked_prefill_size, small.max_running_requests, small.own.prefill_checkpoints) == (2048, 256, False)
    given = settle_for_gpu(make_policy("vllm", chunked_prefill_size=4096), "rtx4090", {"chunked_prefill_size"})
    assert given.chunked_prefill_size == 4096


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_unequal_pages_hit_on_the_scheduler_block_as_vllm_does(mode):
    from conformance.compare import simulated
    from tests import vllm_geometry_scenarios as hand

    hits = [outcome.cached_tokens for outcome in simulated(hand.unequal_pages(), "vllm", mode).values()]
    assert hits == hand.UNEQUAL_PAGES


def test_a_retention_interval_must_be_a_multiple_of_the_scheduler_block():
    # gemma-4's scheduler block is 32 (FULL 32, SWA 16): vLLM refuses 16 and 48, accepts 64
    model = get_model("gemma-4-26b-a4b")
    for retention, refused in ((16, True), (48, True), (64, False)):
        policy = make_policy("vllm", retention_interval=retention)
        layout = layout_for(model, 16, 1024, False)
        if refused:
            with pytest.raises(ValueError, match="multiple of scheduler_block_size 32"):
                check_config(layout, policy, model)
        else:
            check_config(layout, policy, model)


def test_mamba_beside_unequal_attention_pages_is_refused_by_name():
    model = get_model("tiny").replace(layer_kinds=("full", "swa", "mamba"), window=64, num_kv_heads=2,
                                      full_num_kv_heads=1)
    layout = layout_for(model, 16, 64, False)
    with pytest.raises(ValueError, match="_mamba_block_aligned_split"):
        check_config(layout, make_policy("vllm"), model)
