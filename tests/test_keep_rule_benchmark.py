"""``benchmarks/keep_rule.py`` on the 40-line Mooncake head: a flipped switch is put back (several flipped together
too), a switch that changes an output is refused, and a misnamed switch or case is a clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import cases, keep_rule
from sim.bounds import trie_cursor
from sim.cache.blocks import null_runs, tail_runs
from sim.trace.azure_import import import_mooncake
from tests.benchmark_helpers import HEAD

REPO = Path(__file__).resolve().parents[1]


def test_switch_rounds_counted_and_switch_put_back(capsys):
    before = trie_cursor.CURSOR_DIRECT
    keep_rule.main(
        [
            "switch",
            "trie_cursor.CURSOR_DIRECT",
            "no-cache:replay",
            "--trace",
            str(HEAD),
            "--limit",
            "12",
            "--rounds",
            "3",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A: sim.bounds.trie_cursor.CURSOR_DIRECT on")
    assert [line.split()[0] for line in out[1:5]] == ["warm-up,", "round", "round", "round"]
    assert "of 3 below 1" in out[5]
    assert trie_cursor.CURSOR_DIRECT is before


def test_several_switches_flipped_together_and_put_back(capsys, monkeypatch):
    seen = []
    real = keep_rule.simulate

    def noting(trace, config):
        seen.append((null_runs.COUNTED, tail_runs.OWN_RUNS))
        return real(trace, config)

    monkeypatch.setattr(keep_rule, "simulate", noting)
    monkeypatch.setattr(tail_runs, "OWN_RUNS", False)  # put back as it was, not as True
    spec = "null_runs.COUNTED,tail_runs.OWN_RUNS"
    keep_rule.main(["switch", spec, "vllm:replay", "--trace", str(HEAD), "--limit", "12", "--rounds", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A: sim.cache.blocks.null_runs.COUNTED on")
    assert out[1].startswith("A: sim.cache.blocks.tail_runs.OWN_RUNS on")
    assert seen == [(True, True), (False, False), (False, False), (True, True)]  # all on, all off, swapped
    assert null_runs.COUNTED is True and tail_runs.OWN_RUNS is False


def test_bounds_ratio_counts_rounds_within(capsys):
    keep_rule.main(["bounds", "radix:replay", "--trace", str(HEAD), "--limit", "12", "--rounds", "2"])
    assert "of 2 <= 1.25" in capsys.readouterr().out.splitlines()[-1]


def test_timed_ratio_runs_each_policy_timed_against_replayed(capsys, monkeypatch):
    made = []
    real = keep_rule.simulate
    monkeypatch.setattr(
        keep_rule, "simulate", lambda trace, config: made.append(config.mode) or real(trace, config)
    )
    keep_rule.main(["timed", "radix:replay", "--trace", str(HEAD), "--limit", "12", "--rounds", "1"])
    assert "of 1 <= 2.0" in capsys.readouterr().out.splitlines()[-1]
    assert made == ["timed", "replay", "replay", "timed"]  # the order swapped in the second round


def test_a_side_that_changes_the_tables_is_refused():
    trace = import_mooncake(str(HEAD), limit=12, chains=True)
    # bounds on and off make different tables: standing in for a switch that changed an output
    with pytest.raises(SystemExit, match="tables differ"):
        keep_rule.measure(trace, 1, lambda on: [("radix", "replay", on)], same_tables=True)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nowhere.FLAG", "names no file"),
        ("trie_cursor.NOT_A_FLAG", "no bool attribute"),
        ("FLAG", "module.NAME"),
        ("trie_cursor.CURSOR_DIRECT,nowhere.FLAG", "names no file"),
    ],
)
def test_a_misnamed_switch_is_named(spec, message):
    with pytest.raises(SystemExit, match=message):
        keep_rule.resolve_switches(spec)


def test_an_unknown_case_is_named():
    with pytest.raises(SystemExit, match="unknown policy 'nope'"):
        cases.parse_case("nope:replay")
    with pytest.raises(SystemExit, match=r"policy:mode\[:bounds\]"):
        cases.parse_case("radix:replay:with")
    assert cases.parse_case("radix:timed:bounds") == ("radix", "timed", True)


@pytest.mark.parametrize("script", ["scripts/output_hashes.py", "benchmarks/keep_rule.py"])
def test_both_measuring_commands_refuse_a_misnamed_case_before_any_run(script):
    """The two commands share one case parser (``benchmarks/cases.py``): the same error, before the trace is read."""
    args = ["1", "nope:timed"] if script.startswith("scripts") else ["timed", "nope:timed", "--limit", "1"]
    done = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode != 0 and "case 'nope:timed': unknown policy 'nope'" in done.stderr, done.stderr[
        -2000:
    ]
