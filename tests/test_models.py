"""Model presets: byte and FLOP figures worked out by hand from the published configs, and knob validation."""
import dataclasses

import pytest

from sim.models import FULL, MAMBA, MODELS, SWA, ModelSpec, get_model

BF16, FP32 = 2, 4


def test_executor_presets_keep_their_values():
    tiny, small = get_model("tiny"), get_model("small")
    assert (tiny.layer_kinds, tiny.d_model, tiny.window, tiny.mamba_chunk) == ((SWA, MAMBA, FULL), 128, 64, 16)
    assert (small.num_layers(SWA), small.num_layers(MAMBA), small.num_layers(FULL)) == (12, 8, 4)
    assert (small.d_model, small.window, small.mamba_chunk, small.vocab_size) == (1024, 512, 64, 32768)


def test_components_of_each_preset():
    mixes = {name: (m.num_layers(FULL) > 0, m.has_swa, m.has_mamba) for name, m in MODELS.items()}
    assert mixes["inkling"] == (True, True, True)
    assert mixes["gemma-4-26b-a4b"] == (True, True, False)
    assert mixes["qwen3-next"] == (True, False, True)
    assert mixes["gpt-oss-20b"] == (True, True, False)
    assert get_model("gpt-oss-20b").layer_kinds[:4] == (SWA, FULL, SWA, FULL)
    assert get_model("gemma-4-26b-a4b").layer_kinds[:6] == (SWA,) * 5 + (FULL,)
    assert get_model("qwen3-next").layer_kinds[:4] == (MAMBA, MAMBA, MAMBA, FULL)


def test_gpt_oss_bytes_per_token():
    m = get_model("gpt-oss-20b")  # 12 full + 12 sliding layers, 8 kv heads of 64
    assert m.full_kv_bytes_per_token() == 12 * 2 * 8 * 64 * BF16 == 24576
    assert m.swa_kv_bytes_per_token() == 24576
    assert m.mamba_state_bytes() == 0


def test_gemma4_bytes_per_token():
    m = get_model("gemma-4-26b-a4b")
    assert m.swa_kv_bytes_per_token() == 25 * 2 * 8 * 256 * BF16 == 204800
    # global layers: 2 kv heads of 512 and K = V, so one tensor
    assert m.full_kv_bytes_per_token() == 5 * 1 * 2 * 512 * BF16 == 10240
    assert m.full_kv_bytes_per_token() + m.swa_kv_bytes_per_token() == 210 * 1024


def test_qwen3_next_state_bytes():
    m = get_model("qwen3-next")
    assert m.full_kv_bytes_per_token() == 12 * 2 * 2 * 256 * BF16 == 24576
    assert m.swa_kv_bytes_per_token() == 0
    ssm = 32 * 128 * 128 * FP32  # value heads x value dim x key dim, fp32
    conv = 3 * (32 * 128 + 2 * 16 * 128) * BF16  # (kernel-1) x (q, k, v channels)
    assert m.mamba_state_bytes() == 36 * (ssm + conv) == 77_266_944


def test_inkling_state_bytes():
    m = get_model("inkling")
    assert m.full_kv_bytes_per_token() == 4 * 2 * 4 * 128 * BF16 == 8192
    assert m.swa_kv_bytes_per_token() == 12 * 2 * 4 * 128 * BF16 == 24576
    per_layer = 3 * (4 * 4 * 128 + 2 * 1536) * BF16  # (kernel-1) x (two k/v pairs + two hidden streams)
    assert m.mamba_state_bytes() == 16 * per_layer == 491_520


def test_tiny_state_bytes():
    m = get_model("tiny")
    assert m.mamba_state_bytes() == 4 * 32 * 16 * FP32 + 3 * (4 * 32 + 2 * 16) * BF16


def test_gpt_oss_active_params_by_hand():
    m = get_model("gpt-oss-20b")
    attention = 2 * 2880 * 64 * 64 + 2 * 2880 * 8 * 64
    experts = 4 * 3 * 2880 * 2880 + 2880 * 32  # four experts and the router
    assert m.active_param_count() == 24 * (attention + experts) + 201088 * 2880 == 3_607_142_400
    assert m.param_bytes() == 2 * 3_607_142_400


@pytest.mark.parametrize("name, published", [("gpt-oss-20b", 3.6e9), ("gemma-4-26b-a4b", 3.8e9)])
def test_active_params_match_published_counts(name, published):
    assert get_model(name).active_param_count() == pytest.approx(published, rel=0.03)


def test_flops_per_token_by_hand():
    m = get_model("gpt-oss-20b")
    per_key = 12 * 4 * 64 * 64  # 12 layers, QK^T + PV, 64 q heads of 64
    expected = 2 * 3_607_142_400 + per_key * 1000 + per_key * 128  # sliding layers see only 128 keys
    assert m.flops_per_token(1000) == expected


def test_flops_grow_with_context_and_swa_saturates():
    m = get_model("gemma-4-26b-a4b")
    full_step = m.attention_flops_per_attended_token(FULL)
    assert m.flops_per_token(2048) - m.flops_per_token(2047) == full_step
    swa_step = m.attention_flops_per_attended_token(SWA)
    assert m.flops_per_token(1000) - m.flops_per_token(999) == full_step + swa_step
    assert m.flops_per_token(1) < m.flops_per_token(10) < m.flops_per_token(100_000)


def test_state_flops_count_the_scan():
    m = get_model("qwen3-next")
    per_layer = 6 * 32 * 128 * 128 + 2 * 4 * 8192
    assert m.state_flops_per_token() == 36 * per_layer
    assert get_model("gpt-oss-20b").state_flops_per_token() == 0


def test_moe_weight_reads_grow_with_tokens_to_all_experts():
    m = get_model("gpt-oss-20b")
    assert m.expected_experts_touched(1) == pytest.approx(4)
    assert m.weight_bytes_read(1) == m.param_bytes()
    reads = [m.weight_bytes_read(n) for n in (1, 2, 8, 64, 4096)]
    assert reads == sorted(reads) and reads[0] < reads[-1]
    all_experts = m.replace(experts_per_token=32).param_bytes()
    assert reads[-1] == pytest.approx(all_experts, rel=1e-9)


def test_dense_weight_reads_do_not_depend_on_tokens():
    m = get_model("small")
    assert m.weight_bytes_read(1) == m.weight_bytes_read(4096) == m.param_bytes()
    with pytest.raises(ValueError, match="num_tokens"):
        m.weight_bytes_read(0)


def test_window_override():
    m = get_model("gemma-4-26b-a4b").replace(window=512)
    assert m.window == 512 and m.name == "gemma-4-26b-a4b"
    assert m.flops_per_token(4096) < get_model("gemma-4-26b-a4b").flops_per_token(4096)


@pytest.mark.parametrize("name, knobs, words", [
    ("gpt-oss-20b", {"window": 0}, "window must be > 0"),
    ("qwen3-next", {"window": 512}, "no SWA layer"),
    ("inkling", {"mamba_chunk": 0}, "mamba_chunk"),
    ("gpt-oss-20b", {"experts_per_token": 33}, "experts_per_token 33 exceeds num_experts 32"),
    ("small", {"num_kv_heads": 5}, "num_kv_heads 5"),
    ("small", {"d_model": 0}, "d_model must be >= 1"),
    ("small", {"layer_kinds": (FULL, "ssm")}, r"layer_kinds\[1\] is 'ssm'"),
    ("small", {"layer_kinds": ()}, "layer_kinds is empty"),
    ("small", {"windows": 5}, "unknown knob 'windows'"),
])
def test_bad_knobs_are_named(name, knobs, words):
    with pytest.raises(ValueError, match=words) as info:
        get_model(name).replace(**knobs)
    assert repr(name) in str(info.value)


def test_dataclasses_replace_validates_too():
    with pytest.raises(ValueError, match="window"):
        dataclasses.replace(get_model("small"), window=-1)


def test_custom_spec_and_unknown_preset():
    spec = ModelSpec(name="x", layer_kinds=(FULL,), d_model=8, num_q_heads=2, num_kv_heads=1, head_dim=4,
                     window=0, mamba_num_heads=0, mamba_head_dim=0, mamba_state_dim=0, mamba_conv_kernel=0,
                     mamba_chunk=0, d_ff=16, vocab_size=32)
    assert not spec.has_swa and not spec.has_mamba and not spec.is_moe
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        get_model("nope")
