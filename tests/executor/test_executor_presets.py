"""Every model preset runs in the executor with its real layer pattern (shrunk on a CPU by executor/shrink.py,
the cache manager on the full-size preset), and `execute` runs every policy or refuses it up front."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from click.testing import CliRunner  # noqa: E402

from cli import cli  # noqa: E402
from executor.execute import execute  # noqa: E402
from executor.layout import by_blocks  # noqa: E402
from executor.shrink import executed_model, layer_period, shrink_model  # noqa: E402
from executor.support import execute_refusal  # noqa: E402
from sim.cache.blocks.layout import group_kinds  # noqa: E402
from sim.engines.registry import make_policy, policy_names  # noqa: E402
from sim.models import MODELS, get_model  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace.generate import multiturn  # noqa: E402


@pytest.mark.parametrize("name", list(MODELS))
def test_shrink_keeps_what_the_cache_depends_on(name):
    spec = get_model(name)
    small = shrink_model(spec)
    assert small.layer_kinds == layer_period(spec.layer_kinds) and len(spec.layer_kinds) % len(small.layer_kinds) == 0
    assert group_kinds(small) == group_kinds(spec)  # vLLM's KV cache groups
    assert (small.window, small.mamba_variant, small.full_k_eq_v, small.mamba_chunk, small.mamba_conv_kernel) == (
        spec.window, spec.mamba_variant, spec.full_k_eq_v, spec.mamba_chunk, spec.mamba_conv_kernel)
    assert (small.full_kv_geometry() != (small.num_kv_heads, small.head_dim)) == (
        spec.full_kv_geometry() != (spec.num_kv_heads, spec.head_dim))
    if spec.mamba_num_groups > 1:
        assert small.mamba_num_heads // small.mamba_num_groups == spec.mamba_num_heads // spec.mamba_num_groups
    assert bool(small.sconv_dims) == bool(spec.sconv_dims) and small.d_model <= 128
    assert executed_model(spec, "auto", "cuda") is spec and executed_model(spec, "none", "cpu") is spec


def test_a_model_whose_groups_differ_from_the_managers_is_refused():
    spec = get_model("qwen3.5-4b")
    with pytest.raises(ValueError, match="make vLLM groups mamba mamba mamba full, the cache manager's are"):
        by_blocks(shrink_model(spec), 528, ("mamba", "full"), 10)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_preset_executes_bit_exact(name, device):
    trace = multiturn(num_sessions=2, num_turns=2, system_len=150, user_len=10, output_len=6, request_rate=50.0)
    config = SimConfig(policy="sglang-retain", model=name, gpu="cpu", pool_tokens=20_000, mamba_states=64)
    summary = execute(trace, config, device=device, kernels="torch").summary
    assert summary["requests_checked"] == 4 and summary["requests_reusing"] >= 2
    assert summary["requests_not_bit_exact"] == 0 and summary["executed_layers"] == len(
        layer_period(get_model(name).layer_kinds))


def test_every_policy_is_executed_or_refused_by_one_rule():
    refused = {name for name in policy_names() if execute_refusal(make_policy(name)) is not None}
    assert refused == {"radix"}


def test_a_refused_policy_is_refused_while_the_options_are_parsed(tmp_path, monkeypatch):
    import executor.execute as module

    monkeypatch.setattr(module, "HybridModel", lambda *a, **k: pytest.fail("a refused policy built a model"))
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"id": "a", "arrival": 0.0, "prompt": [{"ref": "s", "len": 40}], "output_len": 4}\n')
    result = CliRunner().invoke(cli, ["execute", "--trace", str(trace), "--policy", "radix"])
    assert result.exit_code == 2 and "--policy radix: policy 'radix' reuses FULL KV alone" in result.output


@pytest.mark.slow
def test_every_preset_times_every_sound_policy_is_bit_exact():
    """The issue's matrix (scripts/execute_matrix.py): on a CPU, about ten minutes."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "scripts/execute_matrix.py"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 failing" in done.stdout
