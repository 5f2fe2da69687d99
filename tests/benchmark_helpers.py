"""Running a benchmark script as a user would, for the tests that keep the benchmarks from rotting."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAD = REPO / "tests" / "data" / "mooncake_conversation_head.jsonl"  # the first 40 Mooncake lines


def run_script(name: str, *args: str, timeout: int = 300) -> str:
    """``benchmarks/NAME ARGS`` from the repository root; its stdout (a non-zero exit fails the test)."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout
