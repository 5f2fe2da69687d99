"""The compiled core answers byte for byte what pure Python answers (issue 24: one core from the same source).

Runs only against a build (``HYBRIDCACHE_COMPILED`` set, as `.ci/run`'s compiled step does): every sound
preset and the controls of ``scripts/output_fingerprint.py``, both modes, on the sample traces, once with the
build and once from source, compared as printed (JSON: no wall times in it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.compiled_core import ENV, requested_build

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("no-cache", "radix", "sglang", "sglang-retain", "freetoken", "freetoken-lazy", "vllm", "marconi")
TRACES = ("fanout", "multiturn")

pytestmark = pytest.mark.skipif(requested_build() is None, reason=f"compares against the compiled core ({ENV}=1)")


def _simulate(trace: str, policy: str, mode: str, compiled: bool) -> str:
    env = {key: value for key, value in os.environ.items() if key != ENV}
    if compiled:
        env[ENV] = os.environ[ENV]
    command = [sys.executable, "cli.py", "simulate", "--trace", f"traces/{trace}.jsonl", "--policy", policy,
               "--mode", mode, "--format", "json"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("mode", ("replay", "timed"))
@pytest.mark.parametrize("policy", POLICIES)
def test_compiled_prints_what_pure_python_prints(policy, mode, trace):
    compiled = _simulate(trace, policy, mode, compiled=True)
    assert '"policy"' in compiled
    assert compiled == _simulate(trace, policy, mode, compiled=False)
