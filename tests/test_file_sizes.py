"""Small files (the developers' guide: under ~250 lines; nano-vllm's engine reads in an afternoon): every
Python file outside tests/ holds at most 250 lines."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 250


def tracked_python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return [ROOT / name for name in listed.stdout.split()]
    return [p for p in ROOT.rglob("*.py") if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]


def test_no_file_outside_tests_is_over_250_lines():
    files = [f for f in tracked_python_files() if f.relative_to(ROOT).parts[0] != "tests" and f.exists()]
    assert len(files) > 100, "the file list is the project's sources"
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these files (lines): {long}"
