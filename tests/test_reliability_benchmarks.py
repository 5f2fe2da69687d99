"""The reliability benchmarks on small slices, so they do not rot, and the integrity driver's teeth: it
must catch a leaked pool id."""
from __future__ import annotations

import pytest

from benchmarks.integrity_stress import stress
from sim.cache.pools import Pool
from tests.benchmark_helpers import HEAD, run_script


@pytest.mark.parametrize("preset", ["sglang-retain", "freetoken"])
def test_the_stress_reaches_exhaustion_retraction_and_reuse(preset):
    counts = stress(preset, 8000)
    assert counts["ops"] == 8000
    assert counts["a pool exhausted"] and counts["retractions"] and counts["readmissions"]
    assert counts["cache hits"] and counts["finished"]


@pytest.mark.interpreted
def test_the_stress_catches_a_leaked_id(monkeypatch):
    real_free, calls, leaked = Pool.free, [], []

    def free_all_but_one_once(pool, ids):
        calls.append(1)
        if len(calls) > 50 and len(ids) > 1 and not leaked:
            leaked.append(ids[0])
            ids = ids[1:]
        real_free(pool, ids)

    monkeypatch.setattr(Pool, "free", free_all_but_one_once)
    with pytest.raises(AssertionError, match="ids lost"):
        stress("sglang", 3000)
    assert leaked


def test_memory_prints_a_row_per_case():
    out = run_script("memory.py", "--trace", str(HEAD), "--sizes", "10,20", "--policy", "radix")
    rows = [line.split() for line in out.splitlines() if line.startswith("radix ")]
    assert [row[1] for row in rows] == ["10", "20"] and all(float(row[3]) > 0 for row in rows)


def test_hostile_inputs_prints_its_figure():
    out = run_script("hostile_inputs.py", "--only", "gen/")
    assert "6 of 6 hostile inputs fail cleanly" in out


@pytest.mark.parametrize("name", ["grid_faults.py", "integrity_stress.py"])
def test_help(name):
    assert "usage:" in run_script(name, "--help")
