"""Every kernel compiles for sm_90 with the installed triton, on this CPU-only machine (ptxas ships
in the wheel). Runs the script in a fresh process: here the kernels are interpreted functions."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compile_sm90.py"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")  # a real compile, not a cache hit
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=300)


def test_all_kernels_compile_for_sm90_bf16(tmp_path):
    done = _run(tmp_path, "--dtypes", "bf16")
    assert done.returncode == 0, done.stderr
    compiled = [line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("ok")]
    assert compiled == [f"{name}[bf16]" for name in ("matmul", "rmsnorm", "silu_mul", "causal_conv",
                                                     "ssm_scan", "ssm_scan-gdn", "paged_attention")]


@pytest.mark.slow
def test_all_kernels_compile_for_sm90_fp32_and_tiny(tmp_path):
    for args in (["--dtypes", "fp32"], ["--model", "tiny", "--dtypes", "fp32,bf16"]):
        done = _run(tmp_path, *args)
        assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_variants_the_gpu_check_launches_compile_for_sm90(tmp_path):
    """scripts/gpu_check.sh's execute, captured on this CPU: every specialised variant compiles, including
    those specialised on a runtime int of 1 (a single logit row in a second turn's replay)."""
    done = _run(tmp_path, "--from-run", "--output-len", "4")
    assert done.returncode == 0, done.stderr
    compiled = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ok")]
    kernels = {label.split("[")[0] for label in compiled}
    assert kernels == {"bi_matmul_kernel", "rmsnorm_kernel", "silu_mul_kernel", "causal_conv_kernel",
                       "ssm_scan_kernel", "paged_attention_kernel"}
    assert any("M=1" in line for line in done.stdout.splitlines() if line.startswith("ok"))
