"""scripts/gpu_check.sh on a CPU: its stages and budgets, the runner (JSON after every stage, budgets
enforced, non-zero exit on a failure), the wheel it carries, the GPU trace's precondition, and a dry run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from gpu_check_profiles import GPU  # noqa: E402
from gpu_check_runner import TOTAL_BUDGET_S, Context, Stage, StageFailed, plan_text, run_stages  # noqa: E402
from gpu_check_stages import STAGES, _relies_on_freed_swa  # noqa: E402
from wheel_from_env import build_wheel  # noqa: E402

NAMES = ["env", "wheels", "retain", "negative", "vllm", "calibrate", "tests", "throughput"]


def _script(*args: str, out: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out))
    env.pop("TRITON_INTERPRET", None)  # the script's children decide for themselves
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _context(tmp_path: Path, profile=GPU) -> Context:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return Context(profile, tmp_path, tmp_path, tmp_path / "log", deadline=time.monotonic() + 120, env=env)


def test_stages_fit_one_device_call_with_a_margin():
    assert [s.name for s in STAGES] == NAMES  # the bit-exactness of what users run first, the suite after
    assert all(s.budget_s > 0 and s.what for s in STAGES)
    assert sum(s.budget_s for s in STAGES) <= TOTAL_BUDGET_S - 15 and TOTAL_BUDGET_S <= 450


def test_the_dry_run_runs_what_the_device_runs():
    from gpu_check_profiles import DRY

    assert (DRY.model, DRY.kernels) == (GPU.model, GPU.kernels) == ("small", "triton")
    assert DRY.tests == GPU.tests and DRY.run == GPU.run == ("--warmup", "full")
    assert "tests/executor" in GPU.tests and DRY.workers > 0 and GPU.workers > 0


def test_plan_lists_every_stage_with_its_budget(tmp_path):
    done = _script("--plan", out=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for stage in STAGES:
        assert any(line.split()[:2] == [stage.name, f"{stage.budget_s}s"] for line in lines), stage.name
    assert f"(ceiling {TOTAL_BUDGET_S} s)" in lines[-1]
    assert lines[-1].split()[:2] == ["total", f"{sum(s.budget_s for s in STAGES)}s"]
    assert not (tmp_path / "gpu_check.json").exists()


def test_runner_writes_json_after_every_stage_and_enforces_budgets(tmp_path):
    seen = []

    def first(ctx):
        return {"value": 1}

    def reads_json(ctx):  # the first stage's record is on disk before the second runs
        seen.append(json.loads((ctx.out / "gpu_check.json").read_text()))
        raise StageFailed("wrong result", {"value": 2})

    def sleeps(ctx):
        ctx.run("-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; "
                "time.sleep(60)'])", label="sleeper")

    stages = [Stage("first", 5, "-", first), Stage("second", 5, "-", reads_json), Stage("third", 1, "-", sleeps),
              Stage("fourth", 5, "-", lambda ctx: 1 / 0)]
    began = time.monotonic()
    summary = run_stages(stages, _context(tmp_path), {"mode": "test"})
    assert time.monotonic() - began < 10  # the sleeper and its child were killed at the 1 s budget
    assert [s["name"] for s in seen[0]["stages"]] == ["first"] and seen[0]["stages"][0]["figures"] == {"value": 1}
    statuses = [(s["name"], s["status"]) for s in summary["stages"]]
    assert statuses == [("first", "ok"), ("second", "failed"), ("third", "timeout"), ("fourth", "failed")]
    assert summary["stages"][1]["figures"] == {"value": 2} and "ZeroDivisionError" in summary["stages"][3]["error"]
    assert summary["ok"] is False and json.loads((tmp_path / "gpu_check.json").read_text()) == summary
    assert plan_text(stages).splitlines()[-1].split()[:2] == ["total", "16s"]


def test_the_carried_wheel_installs_and_imports_offline(tmp_path):
    wheel = build_wheel("simpy", tmp_path / "whl")
    assert wheel.name.startswith("simpy-") and wheel.name.endswith("-py3-none-any.whl")
    assert build_wheel("simpy", tmp_path / "again").read_bytes() == wheel.read_bytes()  # deterministic
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                    str(tmp_path / "site"), str(wheel)], check=True, timeout=120)
    found = subprocess.run([sys.executable, "-c", "import simpy; print(simpy.__file__)"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")), check=True)
    assert found.stdout.startswith(str(tmp_path / "site"))
    with pytest.raises(SystemExit, match="not pure Python"):
        build_wheel("numpy", tmp_path / "numpy")


def test_the_gpu_trace_relies_on_freed_swa_under_the_broken_policy_only(tmp_path):
    """The GPU run's negative stage asserts this before executing; here the same code checks it on CPU."""
    ctx = _context(tmp_path)
    assert _relies_on_freed_swa(ctx, "broken-retain-short") == ["p0-t2", "p1-t2", "p2-t2", "p3-t2"]
    assert _relies_on_freed_swa(ctx, "sglang-retain") == []


def test_a_stage_that_fails_makes_the_script_exit_non_zero(tmp_path):
    done = _script("--dry-run", "--only", "env", "--budget-scale", "0.001", out=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [("env", "timeout")]


@pytest.mark.slow
def test_dry_run_passes_every_stage_on_cpu(tmp_path):
    """About ten minutes on a CPU: the Triton kernels under the interpreter and every executor test file."""
    done = _script("--dry-run", out=tmp_path, timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "total" in done.stdout and "all stages ok" in done.stdout
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [s["name"] for s in summary["stages"]] == NAMES and summary["ok"] is True
    figures = {s["name"]: s["figures"] for s in summary["stages"]}
    assert figures["retain"]["requests_not_bit_exact"] == 0 and figures["retain"]["requests_reusing"] > 0
    assert figures["negative"]["not_bit_exact_ids"] == figures["negative"]["relies_on_freed_swa"] != []
    assert figures["vllm"]["requests_not_bit_exact"] == 0 and figures["vllm"]["requests_reusing"] > 0
    assert figures["retain"]["executed_model"] == "small (shrunk)" and figures["retain"]["warmup_s"] > 0
    assert figures["calibrate"]["fit"]["trace_holdout_samples"] > 0
    assert " passed" in figures["tests"]["result"] and "failed" not in figures["tests"]["result"]
    assert {r["kernel"] for r in figures["throughput"]["rows"]} >= {"matmul qkv", "attention SWA decode"}
    returned = sorted(p.name for p in tmp_path.iterdir())
    assert len(returned) <= 8  # what the device tool brings back from $OUT
    assert returned == ["bitwise_broken.csv", "bitwise_retain.csv", "bitwise_vllm.csv", "calibration.json",
                        "gpu_check.json", "gpu_check.log", "throughput.json"]
