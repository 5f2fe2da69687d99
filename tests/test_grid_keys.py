"""Grid keys cover the code and the resolved configuration (the stale-results defect), --keep-old on
purpose, report's warning on mixed code, and the TOML grid file."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

import sim.code_version as code_version
import sim.engines.registry as policies
from cli import cli
from reports.report import write_report
from sim.grid.axes import expand, parse_axes
from sim.grid.points import file_sha256, legacy_key, point_key
from sim.grid.store import PointStore
from sim.grid.sweep import run_grid
from sim.run.simulate import SimConfig
from sim.trace import write_trace
from sim.trace.generate import s1

AXES = {"policy": "sglang,sglang-retain", "page_size": "128", "track_interval": "256,512",
        "chunked_prefill_size": "16384", "pool_tokens": "4000000", "mamba_states": "4096"}


@pytest.fixture
def trace_path(tmp_path):
    path = tmp_path / "s1.jsonl"
    write_trace(s1(num_prompts=2), path)
    return path


def sweep(trace_path, out, **kwargs):
    return run_grid(trace_path, expand(parse_axes(AXES)), out, jobs=1, progress=False, **kwargs)


def other_code(monkeypatch, sha: str = "f" * 64) -> None:
    """What a checkout of other code looks like to the sweep: another hash of sim/'s source."""
    monkeypatch.setattr(code_version, "source_sha256", lambda: sha)


def test_a_code_change_recomputes_every_point(trace_path, tmp_path, monkeypatch):
    first = sweep(trace_path, tmp_path / "out")
    assert len(first.ran) == 4
    assert len(sweep(trace_path, tmp_path / "out").skipped) == 4  # same code: nothing reruns
    other_code(monkeypatch)
    again = sweep(trace_path, tmp_path / "out")
    assert len(again.ran) == 4 and not again.skipped  # the defect: "0 ran, 4 already done"
    record = PointStore(tmp_path / "out").read_point(again.points[0].key)
    assert record["code"]["source_sha256"] == "f" * 64 and record["code"]["version"] == code_version.package_version()


def test_a_changed_preset_default_recomputes_its_points(trace_path, tmp_path, monkeypatch):
    first = sweep(trace_path, tmp_path / "out")
    presets = dict(policies.PRESETS)
    presets["sglang"] = replace(presets["sglang"], swa_eviction_interval=256)
    monkeypatch.setattr(policies, "PRESETS", presets)
    again = sweep(trace_path, tmp_path / "out")
    changed = [p.key for p in again.points if p.config.policy == "sglang"]
    assert sorted(again.ran) == sorted(changed) and len(again.skipped) == 2  # sglang-retain's are unchanged
    assert set(changed).isdisjoint(p.key for p in first.points)


def test_keep_old_keeps_other_codes_points_and_report_warns(trace_path, tmp_path, monkeypatch):
    first = sweep(trace_path, tmp_path / "out")
    other_code(monkeypatch)
    kept = sweep(trace_path, tmp_path / "out", keep_old=True)
    assert not kept.ran and [p.key for p in kept.points] == [p.key for p in first.points]
    store = PointStore(tmp_path / "out")
    store.point_path(first.points[0].key).unlink()  # one point is recomputed by the new code
    mixed = sweep(trace_path, tmp_path / "out", keep_old=True)
    assert len(mixed.ran) == 1
    written = write_report(tmp_path / "out", fmt="md")
    version = code_version.package_version()
    assert written.warnings and f"different code (1 from {version} source ffffffffffff; 3 from" in written.warnings[0]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Warning" in text and "**mixed**" in text
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "out")])
    assert result.exit_code == 0 and "warning: the grid's 4 points come from different code" in result.stderr


def test_keep_old_adopts_a_store_written_before_keys_covered_the_code(trace_path, tmp_path):
    configs = expand(parse_axes(AXES))
    sha = file_sha256(trace_path)
    first = sweep(trace_path, tmp_path / "out")
    store = PointStore(tmp_path / "out")
    for point in first.points:  # rename every point to the old key and forget code and config_key
        record = store.read_point(point.key)
        old = legacy_key(sha, point.config)
        for suffix in (".requests.csv", ".steps.csv"):
            store.point_path(point.key, suffix).rename(store.point_path(old, suffix))
        record = {k: v for k, v in record.items() if k not in ("code", "config_key", "key_parts")} | {"key": old}
        store.point_path(old).write_text(json.dumps(record))
        store.point_path(point.key).unlink()
    assert legacy_key(sha, configs[0]) != point_key(sha, configs[0])
    kept = sweep(trace_path, tmp_path / "out", keep_old=True)
    assert not kept.ran and {p.key for p in kept.points} == {legacy_key(sha, c) for c in configs}
    assert "unrecorded code" not in " ".join(write_report(tmp_path / "out", fmt="png").warnings)  # one code: none
    rerun = sweep(trace_path, tmp_path / "out")
    assert len(rerun.ran) == 4  # without the flag the old points are not this code's


def test_the_key_covers_the_resolved_configuration_not_only_what_was_given(trace_path):
    sha = file_sha256(trace_path)
    given = SimConfig(policy="sglang", knobs={"page_size": 128})
    spelled_out = SimConfig(policy="sglang", knobs={"page_size": 128, "track_interval": 256})
    assert point_key(sha, given) != point_key(sha, spelled_out)  # configuration as given differs...
    from sim.grid.points import config_key

    assert config_key(sha, given) != config_key(sha, spelled_out)
    bad = SimConfig(policy="sglang", knobs={"page_size": 128, "track_interval": 64})
    assert point_key(sha, bad) == point_key(sha, bad)  # a point that cannot resolve still has a key


GRID_FILE = """
trace = "s1.jsonl"
out = "fromfile"
mode = "replay"
jobs = 1
[axes]
policy = ["sglang", "sglang-retain"]
page_size = 128
track_interval = [256, 512]
chunked_prefill_size = 16384
pool_tokens = 4000000
mamba_states = 4096
"""


def test_a_toml_grid_file_runs_the_same_points_as_comma_lists(trace_path, tmp_path):
    (tmp_path / "sweep.toml").write_text(GRID_FILE)
    result = CliRunner().invoke(cli, ["grid", "--config", str(tmp_path / "sweep.toml")])
    assert result.exit_code == 0, result.output
    args = ["grid", "--trace", str(trace_path), "--out", str(tmp_path / "fromflags"), "--mode", "replay", "--jobs", "1"]
    for name, text in AXES.items():
        args += ["--" + name.replace("_", "-"), text]
    assert CliRunner().invoke(cli, args).exit_code == 0
    keys = [json.loads((tmp_path / d / "grid.json").read_text())["points"] for d in ("fromfile", "fromflags")]
    assert keys[0] == keys[1] and len(keys[0]) == 4


@pytest.mark.parametrize("text, extra, message", [
    (GRID_FILE.replace("page_size = 128", "page_size = [128, 0]"), [], "sweep.toml:8: [axes] page_size: --page-size: "
                                                                       "item 2: must be an integer >= 1"),
    (GRID_FILE.replace("[axes]", "colour = 1\n[axes]"), [], "sweep.toml:6: colour: unknown key"),
    (GRID_FILE.replace("page_size = 128", "page_sise = 128"), [], "sweep.toml:8: [axes] page_sise: unknown grid axis"),
    (GRID_FILE, ["--page-size", "64"], "--page-size is given on the command line and in"),
    (GRID_FILE.replace('trace = "s1.jsonl"', ""), [], "--trace is required or trace in the grid file"),
    (GRID_FILE.replace("jobs = 1", "jobs = 0"), [], "sweep.toml:5: jobs: must be an integer >= 1"),
    ("page_size = [", [], "sweep.toml: not valid TOML"),
])
def test_a_bad_grid_file_is_refused_naming_the_file_and_key(trace_path, tmp_path, text, extra, message):
    (tmp_path / "sweep.toml").write_text(text)
    result = CliRunner().invoke(cli, ["grid", "--config", str(tmp_path / "sweep.toml"), *extra])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "fromfile").exists()


def test_grid_writes_parquet_beside_csv(trace_path, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    (tmp_path / "sweep.toml").write_text(GRID_FILE)
    result = CliRunner().invoke(cli, ["grid", "--config", str(tmp_path / "sweep.toml"), "--table-format", "parquet"])
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(tmp_path / "fromfile" / "grid.parquet")
    assert list(table["key"]) == list(pd.read_csv(tmp_path / "fromfile" / "grid.csv")["key"])
