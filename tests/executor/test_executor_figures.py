"""Honest figures: every time `execute` reports names its clock (predicted_*: the cost model; measured_*:
the steps the executor ran), per step and per request; the warm-up is reported apart; `calibrate`'s held-out
error comes from a different trace."""
from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from click.testing import CliRunner  # noqa: E402

from cli import cli  # noqa: E402
from executor.backend import StepTiming  # noqa: E402
from executor.execute import execute  # noqa: E402
from executor.timeline import measured_request_times  # noqa: E402
from sim.cost import StepShape  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace import Request, Segment, Trace, write_trace  # noqa: E402
from sim.trace.generate import multiturn, s3  # noqa: E402


def _timing(seconds, *ends):
    return StepTiming(StepShape.trusted((), (1,)), 0.0, seconds, ends)


def test_measured_times_lay_the_schedule_out_with_measured_steps():
    trace = Trace([
        Request(id="a", arrival=0.0, prompt=[Segment(ref="x", len=10)], output_len=3),
        Request(id="b", after="a", think_time=0.5, prompt=[Segment(ref="y", len=5)], output_len=1),
    ])
    steps = [_timing(0.2, ("a", 10)), _timing(0.1, ("a", 11)), _timing(0.1, ("a", 12)), _timing(0.3, ("b", 5))]
    times = measured_request_times(trace, steps, ["a", "b"]).set_index("id")
    assert times.loc["a"].tolist() == pytest.approx([0.0, 0.2, 0.4, 0.2, 0.1, 0.4])
    # b arrives 0.5 s after a's *measured* finish, and its step waits for it
    assert times.loc["b", ["arrival_at", "first_token_at", "finished_at", "ttft_s"]].tolist() == pytest.approx(
        [0.9, 1.2, 1.2, 0.3])
    assert times.attrs["step_starts"] == pytest.approx([0.0, 0.2, 0.3, 0.9])


def test_every_output_names_predicted_and_measured_apart(tmp_path):
    path = tmp_path / "s3.jsonl"
    write_trace(s3(system_len=120, user_len=8, output_len=4, mode="append"), path)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["execute", "--trace", str(path), "--kernels", "torch", "--page-size", "1",
                                      "--track-interval", "16", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    for figure in ("makespan_s", "mean_ttft_s", "e2e_p50_s", "output_tokens_per_s"):
        assert f"predicted_{figure}" in summary and f"measured_{figure}" in summary and figure not in summary
    requests, steps = pd.read_csv(out / "requests.csv"), pd.read_csv(out / "steps.csv")
    for column in ("arrival_at", "first_token_at", "finished_at", "ttft_s", "e2e_s"):
        assert f"predicted_{column}" in requests and f"measured_{column}" in requests and column not in requests
    assert {"predicted_start_at", "predicted_s", "measured_start_at", "measured_s"} <= set(steps)
    assert "duration_s" not in steps and "start_at" not in steps
    assert steps["measured_s"].sum() == pytest.approx(summary["measured_s"])
    assert summary["measured_makespan_s"] == pytest.approx(requests["measured_finished_at"].max())
    assert summary["measured_makespan_s"] >= steps["measured_s"].sum() - 1e-9  # idle gaps only add
    assert summary["predicted_makespan_s"] == pytest.approx(requests["predicted_finished_at"].max())
    assert "makespan: measured" in result.output


def test_the_warm_up_runs_apart_and_changes_nothing(device):
    trace = multiturn(num_sessions=1, num_turns=2, system_len=60, user_len=6, output_len=4, request_rate=50.0)
    config = SimConfig(policy="sglang-retain", model="tiny", gpu="cpu", pool_tokens=20_000, mamba_states=64)
    warm = execute(trace, config, device=device, kernels="torch", warmup="full")
    cold = execute(trace, config, device=device, kernels="torch", warmup="none")
    assert warm.summary["warmup_s"] > 0 and cold.summary["warmup_s"] is None
    assert warm.summary["steps"] == cold.summary["steps"] == len(warm.step_timings)  # the warm-up is not timed
    assert warm.requests["cached_tokens"].tolist() == cold.requests["cached_tokens"].tolist()
    assert warm.summary["requests_not_bit_exact"] == cold.summary["requests_not_bit_exact"] == 0
    if device == "cpu":
        assert warm.summary["jit_compiles_timed"] is None  # the interpreter compiles nothing
    else:
        assert warm.summary["jit_compiles_timed"] == 0


def _traces(tmp_path):
    fit, other = tmp_path / "fit.jsonl", tmp_path / "other.jsonl"
    write_trace(s3(system_len=120, user_len=8, output_len=6, mode="append"), fit)
    write_trace(multiturn(num_sessions=1, num_turns=2, system_len=80, user_len=6, output_len=10,
                          request_rate=50.0), other)
    return fit, other


def test_calibrate_holds_out_a_different_trace(tmp_path):
    fit, other = _traces(tmp_path)
    common = ["--kernels", "torch", "--page-size", "1", "--track-interval", "16"]
    cal = tmp_path / "cal.json"
    result = CliRunner().invoke(cli, ["calibrate", "--trace", str(fit), "--holdout-trace", str(other), *common,
                                      "-o", str(cal)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    written = json.loads(cal.read_text())["fit"]
    assert written["trace_holdout_name"] == str(other) and written["trace_holdout_samples"] > 0
    assert f"on {written['trace_holdout_samples']} steps of {other}" in result.output
    runs = {}
    for name, trace in (("fit", fit), ("other", other)):
        runs[name] = tmp_path / name
        CliRunner().invoke(cli, ["execute", "--trace", str(trace), *common, "--out", str(runs[name])],
                           catch_exceptions=False)
    again = tmp_path / "again.json"
    result = CliRunner().invoke(cli, ["calibrate", "--from-run", str(runs["fit"]), "--holdout-run",
                                      str(runs["other"]), "-o", str(again)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    refit = json.loads(again.read_text())["fit"]
    assert refit["num_samples"] == written["num_samples"]  # the same steps, read back from timings.csv
    assert refit["trace_holdout_samples"] == written["trace_holdout_samples"]


def test_calibrate_says_what_it_needs(tmp_path):
    result = CliRunner().invoke(cli, ["calibrate", "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2 and "--trace (to execute) or --from-run" in result.output
    result = CliRunner().invoke(cli, ["calibrate", "--from-run", str(tmp_path), "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2 and "not an `execute --out` timings table" in result.output


def test_compiled_variants_are_counted_where_triton_compiles():
    """Under the interpreter nothing compiles (None); with compiled kernels the count starts at 0 and grows
    with each variant a launch compiles: what `jit_compiles_timed` reports on a GPU."""
    import os
    import subprocess
    import sys

    from executor.jit_variants import compiled_variants

    assert compiled_variants() is None or not torch_on_cpu()
    code = "from executor.jit_variants import compiled_variants; print(compiled_variants())"
    env = dict(os.environ, TRITON_INTERPRET="0")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr


def torch_on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()
