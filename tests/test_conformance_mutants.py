"""The mutation harness of the conformance suite (benchmarks/conformance_mutants.py): every mutant of the
catalogue applies (its snippet is in its file exactly once), a stale one is an error rather than a survivor,
and the harness catches a known mutant on one scenario while the unmutated tree passes the same one."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from benchmarks.conformance_mutants import baseline, check_mutant
from benchmarks.mutant_catalogue import CATEGORIES, ENGINES, MutantMissing, apply, load

ROOT = Path(__file__).resolve().parents[1]


def test_every_mutant_applies_exactly_once_and_changes_its_file():
    mutants = load()
    assert len(mutants) >= 40
    assert {m.category for m in mutants} == set(CATEGORIES)
    assert {e for m in mutants for e in m.engines} == set(ENGINES)
    assert {m.path for m in mutants if m.engines == ("sglang", "freetoken")}, "the shared code has mutants"
    for mutant in mutants:
        text = (ROOT / mutant.path).read_text()
        mutated = apply(text, mutant)
        assert mutated != text
        # one line changes (a snippet may carry context; a mutant may add or drop at most one line)
        diff = difflib.ndiff(text.splitlines(), mutated.splitlines())
        changed = [line for line in diff if line[:1] in "+-"]
        assert 1 <= len(changed) <= 2, (mutant.name, changed)


def test_a_snippet_not_found_is_an_error_not_a_survivor(tmp_path):
    stale = load()[0]._replace(name="stale", original="this text is in no file\n")
    with pytest.raises(MutantMissing, match="0 times"):
        apply((ROOT / stale.path).read_text(), stale)
    row = check_mutant(stale, {"sglang": tmp_path / "unused.pickle"}, 60, "single")
    assert "error" in row and "0 times" in row["error"]


def test_a_bad_catalogue_line_is_refused_by_name(tmp_path):
    line = json.loads((ROOT / "benchmarks/conformance_mutants.jsonl").read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**line, "category": "typos"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load(bad)


@pytest.mark.skipif(find_spec("vllm") is None, reason="vllm is not installed (conformance/requirements.txt)")
def test_the_harness_catches_a_known_mutant_and_passes_the_unmutated_tree(tmp_path):
    # vLLM's SWA hit accepting a run one block longer than the window needs: seed 0 reaches it
    oracle = tmp_path / "oracle-vllm.pickle"
    command = [sys.executable, str(ROOT / "benchmarks/mutant_oracle.py"), "--engine", "vllm", "--seeds", "1"]
    command += ["--first-seed", "0", "--kinds", "single", "--out", str(oracle)]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, timeout=120)
    mutant = next(m for m in load() if m.name == "vl-swa-run")
    caught = check_mutant(mutant, {"vllm": oracle}, 120, "single")
    assert caught["caught"] and caught["first"]["requests_differ"] >= 1, caught
    clean = baseline({"vllm": oracle}, 120, "single")["vllm"]
    assert clean["compared"] == 2 and not clean["caught"], clean
