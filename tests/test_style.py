"""The formatted and type-checked parts of the code stay so: ``ruff format --check`` and ``mypy``
(configured in pyproject.toml) over each folder in CHECKED, failing with the tools' own output."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["sim/cache", "sim/run"]


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("folder", CHECKED)
def test_formatted(folder):
    done = _run("ruff", "format", "--check", "--diff", folder)
    assert done.returncode == 0, f"ruff format {folder} would change:\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("folder", CHECKED)
def test_type_checked(folder):
    done = _run("mypy", folder)
    assert done.returncode == 0, f"mypy {folder}:\n{done.stdout}{done.stderr}"
