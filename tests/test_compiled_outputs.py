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


def _simulate(trace: str, policy: str, mode: str, compiled: bool, extra: tuple[str, ...] = ()) -> str:
    env = {key: value for key, value in os.environ.items() if key != ENV}
    if compiled:
        env[ENV] = os.environ[ENV]
    command = [sys.executable, "cli.py", "simulate", "--trace", f"traces/{trace}.jsonl", "--policy", policy]
    command += ["--mode", mode, "--format", "json", *extra]
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


@pytest.mark.parametrize("policy", ("sglang", "marconi-sglang"))
def test_compiled_mixed_chunks_print_what_pure_python_prints(policy):
    """SGLang's scheduler marks a mixed batch's decode rows on whatever rules it drives: a compiled rules class
    must declare that field (Marconi's did not, and its mixed-chunk runs failed compiled only)."""
    extra = ("--mixed-chunk", "true")
    compiled = _simulate("multiturn", policy, "timed", compiled=True, extra=extra)
    assert '"policy"' in compiled
    assert compiled == _simulate("multiturn", policy, "timed", compiled=False, extra=extra)
