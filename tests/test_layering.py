"""SPEC section 2: sim/cache imports no simpy/torch/triton; sim imports no torch/triton and nothing above it
(reports, executor, cli); executor no simpy."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# sim sits below reports, the executor and the command line: it never imports them
RULES = [("sim/cache", {"simpy", "torch", "triton"}), ("sim", {"torch", "triton", "reports", "executor", "cli"}),
         ("executor", {"simpy"})]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("folder, forbidden", RULES)
def test_layering(folder, forbidden):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"{folder} has no Python files"
    offenders = {str(f.relative_to(ROOT)): sorted(imported_modules(f) & forbidden) for f in files}
    assert not {f: mods for f, mods in offenders.items() if mods}
