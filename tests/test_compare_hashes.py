"""scripts/compare_hashes.py: equal hashes pass; a changed hash, a missing case and a case far slower than the
base are each named, with their exit status; a line that is not a hash line is an error naming file and line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from compare_hashes import main  # noqa: E402

BASE = """\
sglang-retain:replay             req=7fb35aa0e37213ba steps=86c664c28cb14f0e sum=a331ddf8d4fe9ba5 cpu=0.20
marconi-vllm:replay              req=fe306bd7e9d0d724 steps=28e51ca565e77276 sum=b90c788dafbda857 cpu=2.80
"""


def _files(tmp_path: Path, new: str) -> list[str]:
    (tmp_path / "base.txt").write_text(BASE)
    (tmp_path / "new.txt").write_text(new)
    return [str(tmp_path / "base.txt"), str(tmp_path / "new.txt")]


def test_equal_hashes_within_the_noise_pass(tmp_path, capsys):
    # 0.20 -> 0.45 s is 2.25x, but both under --min-cpu (0.5 s): not read; 2.80 -> 3.90 s is under 2x
    new = BASE.replace("cpu=0.20", "cpu=0.45").replace("cpu=2.80", "cpu=3.90")
    assert main(_files(tmp_path, new)) == 0
    assert "2 cases: outputs equal, none slower" in capsys.readouterr().out


def test_a_case_far_slower_is_named(tmp_path, capsys):
    assert main(_files(tmp_path, BASE.replace("cpu=2.80", "cpu=45.14"))) == 2
    assert "SLOWER marconi-vllm:replay: cpu 2.80 -> 45.14 s (16.1x)" in capsys.readouterr().out
    assert main([*_files(tmp_path, BASE.replace("cpu=2.80", "cpu=4.30")), "--slower", "1.5"]) == 2


def test_a_changed_hash_or_missing_case_fails(tmp_path, capsys):
    assert main(_files(tmp_path, BASE.replace("sum=b90c788dafbda857", "sum=0000000000000000"))) == 1
    assert "DIFFERENT marconi-vllm:replay" in capsys.readouterr().out
    assert main(_files(tmp_path, BASE.splitlines()[0] + "\n")) == 1
    assert "missing in the new run: marconi-vllm:replay" in capsys.readouterr().out


def test_a_line_that_is_no_hash_line_is_named(tmp_path):
    with pytest.raises(SystemExit, match=r"new\.txt:2: not an output_hashes\.py line"):
        main(_files(tmp_path, BASE.splitlines()[0] + "\nTraceback (most recent call last):\n"))
