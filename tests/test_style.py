"""The formatted and type-checked parts of the code stay so: ``ruff format --check`` and ``mypy``
(configured in pyproject.toml) over each folder in CHECKED, failing with the tools' own output."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# every package is formatted and type-checked (the engines' packages are read for their types, unstubbed)
FORMATTED = ["sim", "reports", "commands", "executor", "conformance", "benchmarks", "scripts", "cli.py"]
TYPED = [
    "sim/cache",
    "sim/run",
    "sim/sched",
    "sim/engines",
    "sim/bounds",
    "sim/models",
    "sim/cost",
    "sim/experiments",
    "sim/trace",
    "sim/grid",
    "sim/tokens.py",
    "sim/align.py",
    "sim/atomic.py",
    "sim/progress.py",
    "sim/code_version.py",
    "executor",
    "scripts",
    "reports",
    "commands",
    "benchmarks",
    "conformance",
    "cli.py",
]


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", *args]
    # a guard against a hung checker, not a speed target: a cold mypy over the tree beside a busy suite took 300 s
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)


@pytest.mark.parametrize("folder", FORMATTED)
def test_formatted(folder):
    done = _run("ruff", "format", "--check", "--diff", folder)
    assert done.returncode == 0, f"ruff format {folder} would change:\n{done.stdout}{done.stderr}"


def test_type_checked():
    done = _run("mypy", *TYPED)
    assert done.returncode == 0, f"mypy:\n{done.stdout}{done.stderr}"


def test_linted():
    done = _run("ruff", "check", *FORMATTED)
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"
