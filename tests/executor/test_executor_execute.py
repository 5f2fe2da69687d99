"""`execute`: the real executor driven by the same scheduler and cache manager as the simulator.

Every request's outputs must equal a replay from scratch bit for bit where the policy is correct (the
deliberately wrong ones are in test_executor_negative_controls.py).
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from click.testing import CliRunner  # noqa: E402

from cli import cli  # noqa: E402
from executor.execute import execute  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace.generate import s1, s3  # noqa: E402

S3_KNOBS = dict(page_size=1, track_interval=16, swa_eviction_interval=16)


def run(trace, policy, knobs, kernels="torch", device="cpu"):
    config = SimConfig(policy=policy, model="tiny", gpu="cpu", knobs=knobs, pool_tokens=20_000, mamba_states=64)
    return execute(trace, config, device=device, kernels=kernels)


@pytest.mark.parametrize("policy, fanout_cached", [("freetoken", 0), ("freetoken-lazy", 192)])
@pytest.mark.parametrize("mode", ["fanout", "append"])
def test_s3_shaped_runs_are_bit_exact(policy, fanout_cached, mode, device):
    result = run(s3(system_len=200, user_len=10, output_len=8, mode=mode), policy, S3_KNOBS, device=device)
    assert result.summary["requests_not_bit_exact"] == 0 and result.summary["requests_checked"] == 2
    if mode == "fanout":  # tiny has MAMBA layers: FreeToken's 64-token grid puts the state at 192
        assert result.requests["cached_tokens"].iloc[1] == fanout_cached


def test_triton_kernels_are_bit_exact_too(device):
    trace = s1(num_prompts=1, prompt_len=40, output_len=20)
    result = run(trace, "sglang-retain", dict(page_size=16, track_interval=32, swa_eviction_interval=16),
                 kernels="triton", device=device)
    assert result.summary["requests_not_bit_exact"] == 0 and result.summary["logprob_max_abs_diff"] == 0.0
    assert result.summary["cached_tokens"] > 0 and result.summary["outputs_checked"] == 20 + 1


def test_execute_cli_json(tmp_path):
    trace = tmp_path / "s3.jsonl"
    CliRunner().invoke(cli, ["trace", "gen", "s3", "--system-len", "120", "--user-len", "8", "--output-len", "4",
                             "-o", str(trace)], catch_exceptions=False)
    result = CliRunner().invoke(cli, ["execute", "--trace", str(trace), "--kernels", "torch", "--page-size", "1",
                                      "--track-interval", "16", "--format", "json", "--out", str(tmp_path / "out")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert {"requests_checked", "requests_not_bit_exact", "not_bit_exact_ids", "logprob_max_abs_diff", "kl_max",
            "step_time_mape", "measured_tokens_per_s"} <= set(payload)
    assert payload["requests_not_bit_exact"] == 0 and payload["logprob_max_abs_diff"] == 0.0
    assert (tmp_path / "out" / "bitwise.csv").exists()


def test_calibrate_writes_a_file_simulate_reads(tmp_path):
    trace = tmp_path / "s3.jsonl"
    CliRunner().invoke(cli, ["trace", "gen", "s3", "--system-len", "120", "--user-len", "8", "--output-len", "6",
                             "-o", str(trace)], catch_exceptions=False)
    calibration = tmp_path / "cal.json"
    result = CliRunner().invoke(cli, ["calibrate", "--trace", str(trace), "--kernels", "torch", "--page-size", "1",
                                      "--track-interval", "16", "-o", str(calibration)], catch_exceptions=False)
    assert result.exit_code == 0 and calibration.exists(), result.output
    simulated = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--model", "tiny", "--gpu", "cpu",
                                         "--calibration", str(calibration), "--format", "json"], catch_exceptions=False)
    assert simulated.exit_code == 0 and json.loads(simulated.stdout)["summary"]["makespan_s"] > 0


def test_bit_exact_when_the_swa_pool_must_evict(device):
    from sim.trace.generate import fanout

    trace = fanout(num_groups=2, prompts_per_group=4, system_len=120, question_len=24, output_len=40,
                   request_rate=20.0, seed=0)
    knobs = dict(page_size=16, track_interval=32, swa_eviction_interval=16, max_running_requests=2,
                 chunked_prefill_size=64)
    # 288: under SGLang's own scheduler (prefill batches apart from decode) 320 slots never fill, though they evict
    config = SimConfig(policy="sglang-retain", model="tiny", gpu="cpu", knobs=knobs, pool_tokens=20_000,
                       swa_pool_tokens=288, mamba_states=64)
    result = execute(trace, config, device=device, kernels="torch")
    measured = result.measured.summary
    assert measured["peak_swa_slots"] == 288 and measured["evictions_swa"] > 0  # full: the tree's SWA was evicted
    assert result.summary["requests_not_bit_exact"] == 0 and result.summary["cached_tokens"] > 0


def _trace_with_one_too_big(tmp_path):
    """b's 400-token prompt can never fit a 256-token pool: the fits check refuses it before it runs."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "arrival": 0.0, "prompt": [{"ref": "s", "len": 40}], "output_len": 4}\n'
                    '{"id": "b", "arrival": 0.0, "prompt": [{"ref": "big", "len": 400}], "output_len": 4}\n')
    return path


def test_a_rejected_request_is_reported_as_rejected_not_as_a_kl_alarm(tmp_path):
    result = CliRunner().invoke(cli, ["execute", "--trace", str(_trace_with_one_too_big(tmp_path)), "--kernels",
                                      "torch", "--pool-tokens", "256", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["requests_rejected"] == 1 and payload["rejected_ids"] == ["b"]
    assert payload["requests_checked"] == 1 and payload["kl_max"] == 0.0 and payload["requests_not_bit_exact"] == 0


def test_every_request_rejected_is_a_report_not_a_crash(tmp_path):
    trace = tmp_path / "b.jsonl"
    trace.write_text(_trace_with_one_too_big(tmp_path).read_text().splitlines()[1] + "\n")
    result = CliRunner().invoke(cli, ["execute", "--trace", str(trace), "--kernels", "torch", "--pool-tokens", "256",
                                      "--out", str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "rejected (never served, not checked) 1: b" in result.output and "steps                           0" in \
        result.output
    assert (tmp_path / "out" / "timings.csv").read_text() == "tokens,prefill_tokens,predicted_s,measured_s,prefill_chunks,decode_contexts\n"
    calibrated = CliRunner().invoke(cli, ["calibrate", "--trace", str(trace), "--kernels", "torch", "--pool-tokens",
                                          "256", "-o", str(tmp_path / "cal.json")])
    assert calibrated.exit_code == 2 and "no step ran" in calibrated.output
    assert not (tmp_path / "cal.json").exists()


def test_cuda_without_cuda_says_so(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = CliRunner().invoke(cli, ["execute", "--trace", str(_trace_with_one_too_big(tmp_path)), "--device", "cuda"])
    assert result.exit_code == 2 and "--device cuda: this machine has no CUDA device" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("policy", ["marconi", "marconi-sglang", "marconi-vllm"])
def test_marconi_hits_are_bit_exact(policy, device):
    from sim.trace.generate import multiturn

    trace = multiturn(num_sessions=2, num_turns=3, system_len=100, user_len=12, output_len=10, request_rate=50.0)
    result = run(trace, policy, dict(chunked_prefill_size=64), device=device)
    assert result.summary["requests_not_bit_exact"] == 0 and result.summary["requests_checked"] == 6
    assert result.summary["cached_tokens"] > 0  # the follow-ups resume from the states their turns left


def test_marconi_under_one_byte_budget_evicts_and_stays_bit_exact(tmp_path):
    from sim.cache.byte_budget import unit_bytes
    from sim.models import get_model
    from sim.trace import write_trace
    from sim.trace.generate import multiturn

    kv, _, state = unit_bytes(get_model("tiny"), 1)
    path = tmp_path / "mt.jsonl"
    write_trace(multiturn(num_sessions=3, num_turns=3, system_len=100, user_len=12, output_len=10,
                          request_rate=50.0), path)
    result = CliRunner().invoke(cli, ["execute", "--trace", str(path), "--policy", "marconi", "--kernels", "torch",
                                      "--chunked-prefill-size", "64", "--cache-bytes", str(12 * state + 300 * kv),
                                      "--format", "json", "--out", str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["requests_not_bit_exact"] == 0 and payload["cached_tokens"] > 0
    measured = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert measured["evictions_full"] > 0 and measured["evictions_mamba"] > 0  # the budget was contended


@pytest.mark.parametrize("policy, exit_code", [("broken-stale-state", 1), ("sglang-retain", 0)])
def test_execute_exits_1_when_any_request_is_not_bit_exact(tmp_path, policy, exit_code):
    """The negative control's command line as docs/executor.md gives it: a wrong policy fails the command."""
    trace = tmp_path / "s1.jsonl"
    CliRunner().invoke(cli, ["trace", "gen", "s1", "--num-prompts", "2", "--prompt-len", "50", "--output-len", "20",
                             "-o", str(trace)], catch_exceptions=False)
    result = CliRunner().invoke(cli, ["execute", "--trace", str(trace), "--policy", policy, "--model", "tiny",
                                      "--gpu", "cpu", "--kernels", "torch", "--pool-tokens", "20000",
                                      "--mamba-states", "64", "--page-size", "16", "--track-interval", "32",
                                      "--swa-eviction-interval", "16"], catch_exceptions=False)
    assert result.exit_code == exit_code, result.output
    assert f"not bit-exact vs a replay       {2 * exit_code}" in result.output
    assert "says nothing of the simulator" in result.output  # a CPU's step-time error is explained
