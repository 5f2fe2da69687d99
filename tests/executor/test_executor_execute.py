"""`execute`: the real executor driven by the same scheduler and cache manager as the simulator.

Reuse must match the prediction request by request, KL must be exactly 0 where reuse is correct, and a
deliberately broken policy must show nonzero KL on exactly the requests that relied on freed SWA.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from click.testing import CliRunner  # noqa: E402

from cli import cli  # noqa: E402
from executor.execute import execute  # noqa: E402
from sim.simulate import SimConfig  # noqa: E402
from sim.trace_gen import s1, s3  # noqa: E402

S1_KNOBS = dict(page_size=16, track_interval=32, swa_eviction_interval=16)
S3_KNOBS = dict(page_size=1, track_interval=16, swa_eviction_interval=16)


def run(trace, policy, knobs, kernels="torch", device="cpu"):
    config = SimConfig(policy=policy, model="tiny", gpu="cpu", knobs=knobs, pool_tokens=20_000, mamba_states=64)
    return execute(trace, config, device=device, kernels=kernels)


@pytest.fixture(scope="module")
def s1_trace():
    # a 150-token prompt, 100 output tokens: the decode region ends past the 224 checkpoint, where the
    # broken policy's frontier (one page too high) cuts into the window the match needs
    return s1(num_prompts=2, prompt_len=150, output_len=100)


@pytest.mark.parametrize("policy", ["sglang", "sglang-retain"])
def test_s1_shaped_reuse_matches_and_kl_is_exactly_zero(s1_trace, policy, device):
    result = run(s1_trace, policy, S1_KNOBS, device=device)
    summary = result.summary
    assert summary["reuse_mismatches"] == 0
    assert summary["kl_nonzero"] == 0 and summary["kl_max"] == 0.0
    assert summary["cached_tokens"] > 0
    assert (result.requests["kl"] == 0.0).all()


@pytest.mark.parametrize("policy, fanout_cached", [("freetoken", 0), ("freetoken-lazy", 192)])
@pytest.mark.parametrize("mode", ["fanout", "append"])
def test_s3_shaped_reuse_matches_and_kl_is_exactly_zero(policy, fanout_cached, mode, device):
    result = run(s3(system_len=200, user_len=10, output_len=8, mode=mode), policy, S3_KNOBS, device=device)
    assert result.summary["reuse_mismatches"] == 0 and result.summary["kl_nonzero"] == 0
    if mode == "fanout":  # tiny has MAMBA layers: FreeToken's 64-token grid puts the state at 192
        assert result.requests["measured_cached"].iloc[1] == fanout_cached


def test_broken_policy_shows_nonzero_kl_on_exactly_the_requests_that_read_freed_swa(s1_trace, device):
    result = run(s1_trace, "broken-retain-short", S1_KNOBS, device=device)
    relied = set(result.requests.loc[result.requests["relies_on_freed_window"], "id"])
    assert relied == {"p0-t2", "p1-t2"}
    assert set(result.summary["kl_nonzero_ids"]) == relied
    assert result.summary["reuse_mismatches"] == 0


def test_triton_kernels_give_exactly_zero_kl_too(device):
    trace = s1(num_prompts=1, prompt_len=40, output_len=20)
    result = run(trace, "sglang-retain", dict(page_size=16, track_interval=32, swa_eviction_interval=16),
                 kernels="triton", device=device)
    assert result.summary["reuse_mismatches"] == 0 and result.summary["kl_nonzero"] == 0
    assert result.summary["cached_tokens"] > 0


def test_execute_cli_json(tmp_path):
    trace = tmp_path / "s3.jsonl"
    CliRunner().invoke(cli, ["trace", "gen", "s3", "--system-len", "120", "--user-len", "8", "--output-len", "4",
                             "-o", str(trace)], catch_exceptions=False)
    result = CliRunner().invoke(cli, ["execute", "--trace", str(trace), "--kernels", "torch", "--page-size", "1",
                                      "--track-interval", "16", "--json", "--out", str(tmp_path / "out")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert {"requests", "reuse_mismatches", "kl_nonzero", "kl_max", "step_time_mape", "tokens_per_s"} <= set(payload)
    assert payload["reuse_mismatches"] == 0 and payload["kl_nonzero"] == 0
    assert (tmp_path / "out" / "kl.csv").exists()


def test_calibrate_writes_a_file_simulate_reads(tmp_path):
    trace = tmp_path / "s3.jsonl"
    CliRunner().invoke(cli, ["trace", "gen", "s3", "--system-len", "120", "--user-len", "8", "--output-len", "6",
                             "-o", str(trace)], catch_exceptions=False)
    calibration = tmp_path / "cal.json"
    result = CliRunner().invoke(cli, ["calibrate", "--trace", str(trace), "--kernels", "torch", "--page-size", "1",
                                      "--track-interval", "16", "-o", str(calibration)], catch_exceptions=False)
    assert result.exit_code == 0 and calibration.exists(), result.output
    simulated = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--model", "tiny", "--gpu", "cpu",
                                         "--calibration", str(calibration), "--json"], catch_exceptions=False)
    assert simulated.exit_code == 0 and json.loads(simulated.output)["makespan_s"] > 0


def test_kl_stays_zero_when_the_swa_pool_must_evict(device):
    from sim.trace_gen import fanout

    trace = fanout(num_groups=2, prompts_per_group=4, system_len=120, question_len=24, output_len=40,
                   request_rate=20.0, seed=0)
    knobs = dict(page_size=16, track_interval=32, swa_eviction_interval=16, max_running_requests=2,
                 chunked_prefill_size=64)
    config = SimConfig(policy="sglang-retain", model="tiny", gpu="cpu", knobs=knobs, pool_tokens=20_000,
                       swa_pool_tokens=320, mamba_states=64)
    result = execute(trace, config, device=device, kernels="torch")
    assert result.measured.summary["peak_swa_slots"] == 320  # the pool ran full: the tree's SWA was evicted
    assert result.summary["reuse_mismatches"] == 0 and result.summary["kl_nonzero"] == 0
    assert result.summary["cached_tokens"] > 0
