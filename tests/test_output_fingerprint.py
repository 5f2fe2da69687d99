"""scripts/output_fingerprint.py compare: identical trees pass; a changed byte, a missing file, a changed grid
table are named; the grid's code-identity fields and point keys are not differences."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from output_fingerprint import compare  # noqa: E402


def _tree(root: Path, key: str, source: str, table: str = "a,b\n1,2\n") -> Path:
    (root / "grid" / "points").mkdir(parents=True)
    (root / "sim.stdout").write_text(f"wrote {root}/x.csv\nrc=0\n")  # the output folder's own path is no difference
    (root / "grid" / "points" / f"{key}.json").write_text(json.dumps({"key": key, "source_sha256": source, "x": 1}))
    (root / "grid" / "points" / f"{key}.requests.csv").write_text(table)
    (root / "grid" / "grid.csv").write_text(f"key,source_sha256,cached\n{key},{source},5\n")
    return root


def test_code_identity_is_not_a_difference(tmp_path):
    assert compare(_tree(tmp_path / "a", "k1", "s1"), _tree(tmp_path / "b", "k2", "s2")) == []


def test_changed_outputs_are_named(tmp_path):
    a, b = _tree(tmp_path / "a", "k1", "s1"), _tree(tmp_path / "b", "k2", "s2", table="a,b\n1,3\n")
    (b / "sim.stdout").write_text("something else\n")
    (a / "only.txt").write_text("x")
    assert compare(a, b) == ["only in one: only.txt", "differs: sim.stdout", "differs: grid store (tables)"]
