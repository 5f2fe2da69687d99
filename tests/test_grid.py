"""Grid sweeps: comma-list axes, point keys, the per-point store, resume after a kill, failing points, CLI."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import cli
from sim.grid.axes import expand, parse_axes, parse_axis
from sim.grid.points import config_to_dict, file_sha256, point_key
from sim.grid.store import PointStore
from sim.grid.sweep import run_grid
from sim.run.simulate import SimConfig, simulate
from sim.trace import load_trace, write_trace
from sim.trace.generate import s1

S1_KNOBS = {"chunked_prefill_size": "16384", "pool_tokens": "4000000", "mamba_states": "4096"}


@pytest.fixture
def trace_path(tmp_path):
    path = tmp_path / "s1.jsonl"
    write_trace(s1(num_prompts=4), path)
    return path


def s1_configs(pages="64,128", intervals="128,256", policies="sglang,sglang-retain"):
    return expand(parse_axes({"policy": policies, "page_size": pages, "track_interval": intervals, **S1_KNOBS}))


def test_parse_axis_reads_typed_lists():
    assert parse_axis("page_size", "64, 128") == [64, 128]
    assert parse_axis("kv_memory_gb", "20,40.5") == [20.0, 40.5]
    assert parse_axis("swa_pool_floor", "window,window+interval") == ["window", "window+interval"]


@pytest.mark.parametrize("name, text, message", [
    ("policy", "", "--policy: empty list"),
    ("policy", "sglang,nope", "--policy: item 2: unknown policy 'nope'"),
    ("page_size", "64,,128", "--page-size: item 2 of '64,,128' is empty"),
    ("page_size", "64,0", "must be an integer >= 1, got 0"),
    ("track_interval", "256,abc", "must be an integer >= 1 and <= 2147483647, got 'abc'"),
    ("page_size", "64,64", "'64' appears more than once"),
    ("kv_memory_gb", "nan", "finite number > 0"),
])
def test_parse_axis_rejects_bad_lists(name, text, message):
    with pytest.raises(ValueError) as error:
        parse_axis(name, text)
    assert message in str(error.value)


def test_expand_is_the_cartesian_product_policy_fastest():
    configs = s1_configs(pages="64,128", intervals="128,256,512")
    assert len(configs) == 12
    assert [c.policy for c in configs[:2]] == ["sglang", "sglang-retain"]
    assert [(c.knobs["page_size"], c.knobs["track_interval"]) for c in configs[::2]] == [
        (64, 128), (64, 256), (64, 512), (128, 128), (128, 256), (128, 512)]
    assert all(c.pool_tokens == 4_000_000 and c.knobs["chunked_prefill_size"] == 16384 for c in configs)


def test_point_key_covers_trace_bytes_config_and_defaults(trace_path, tmp_path):
    sha = file_sha256(trace_path)
    config = SimConfig(policy="sglang", knobs={"page_size": 64})
    assert point_key(sha, config) == point_key(sha, SimConfig(policy="sglang", knobs={"page_size": 64, "window": None}))
    assert point_key(sha, config) != point_key(sha, SimConfig(policy="sglang", knobs={"page_size": 128}))
    assert point_key(sha, config) != point_key(sha, SimConfig(policy="sglang", knobs={"page_size": 64},
                                                               kv_memory_gb=20.0))
    other = tmp_path / "other.jsonl"
    write_trace(s1(num_prompts=3), other)
    assert point_key(file_sha256(other), config) != point_key(sha, config)
    assert config_to_dict(config)["kv_memory_gb"] == 40.0  # defaults are part of the stored configuration


def test_a_point_file_holds_config_summary_and_tables_equal_to_simulate(trace_path, tmp_path):
    configs = s1_configs(pages="128", intervals="256", policies="sglang-retain")
    run = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    store = PointStore(tmp_path / "out")
    record = store.read_point(run.points[0].key)
    direct = simulate(load_trace(trace_path), configs[0])
    assert record["summary"] == json.loads(json.dumps(direct.summary.as_dict()))
    assert record["config"] == config_to_dict(configs[0])
    assert record["resolved"]["page_size"] == 128 and record["resolved"]["window"] == 512
    assert store.read_requests(run.points[0].key)["cached_tokens"].tolist() == direct.requests["cached_tokens"].tolist()
    assert len(store.read_steps(run.points[0].key)) == len(direct.steps)
    assert not list((tmp_path / "out").rglob("*.tmp"))  # atomic writes leave no temporary files


class Killed(Exception):
    pass


def test_resume_after_a_kill_skips_finished_points_and_ends_with_the_same_table(trace_path, tmp_path):
    configs = s1_configs()
    reference = run_grid(trace_path, configs, tmp_path / "reference", jobs=1, progress=False)
    seen = []

    def kill_after_three(outcome):
        seen.append(outcome.key)
        if len(seen) == 3:
            raise Killed

    with pytest.raises(Killed):
        run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False, on_outcome=kill_after_three)
    store = PointStore(tmp_path / "out")
    assert [p.key for p in reference.points if store.is_done(p.key)] == seen
    mtimes = {key: store.point_path(key).stat().st_mtime_ns for key in seen}
    rerun = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    assert rerun.skipped == seen and len(rerun.ran) == 5 and set(rerun.ran).isdisjoint(seen)
    assert {key: store.point_path(key).stat().st_mtime_ns for key in seen} == mtimes
    assert (tmp_path / "out" / "grid.csv").read_bytes() == (tmp_path / "reference" / "grid.csv").read_bytes()


def test_deleted_point_files_are_recomputed_and_nothing_else(trace_path, tmp_path):
    configs = s1_configs()
    first = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    store = PointStore(tmp_path / "out")
    gone = [first.points[1].key, first.points[6].key]
    for key in gone:
        store.point_path(key).unlink()
    again = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    assert again.ran == gone and len(again.skipped) == 6
    assert again.table.equals(first.table)


def test_worker_processes_give_the_same_results_as_one_process(trace_path, tmp_path):
    configs = s1_configs()
    serial = run_grid(trace_path, configs, tmp_path / "serial", jobs=1, progress=False)
    pooled = run_grid(trace_path, configs, tmp_path / "pooled", jobs=2, progress=False)
    assert sorted(pooled.ran) == sorted(serial.ran)
    assert (tmp_path / "pooled" / "grid.csv").read_bytes() == (tmp_path / "serial" / "grid.csv").read_bytes()
    for point in serial.points:
        for suffix in (".json", ".requests.csv", ".steps.csv"):
            name = f"points/{point.key}{suffix}"
            assert (tmp_path / "pooled" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes()


def test_a_failing_point_is_recorded_and_the_rest_complete(trace_path, tmp_path):
    configs = s1_configs(pages="64,128", intervals="64,256")  # interval 64 at page 128: make_policy raises
    run = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    assert len(run.failed) == 2 and len(run.ran) == 6
    for failure in run.failed:
        assert failure["config"]["knobs"] == {"chunked_prefill_size": 16384, "page_size": 128, "track_interval": 64}
        assert "track_interval 64 must be a multiple of page_size 128" in failure["error"]
        saved = json.loads((tmp_path / "out" / "failed" / f"{failure['key']}.json").read_text())
        assert saved["error"] == failure["error"]
    assert list(run.table["status"]).count("failed") == 2 and list(run.table["status"]).count("ok") == 6
    assert run.table["cached_tokens"].dtype == "Int64"  # counts stay integers beside the failed rows' blanks


def grid_args(trace_path, out, *extra):
    return ["grid", "--trace", str(trace_path), "--policy", "sglang,sglang-retain", "--page-size", "64,128",
            "--track-interval", "64,256", "--chunked-prefill-size", "16384", "--pool-tokens", "4000000",
            "--mamba-states", "4096", "--out", str(out), "--jobs", "1", *extra]


def test_cli_grid_exits_1_naming_failed_points_and_0_once_they_are_gone(trace_path, tmp_path):
    result = CliRunner().invoke(cli, grid_args(trace_path, tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "8 points: 6 ran, 0 already done, 2 failed" in result.output
    assert "failed" in result.output and "page_size=128 track_interval=64" in result.output
    assert "track_interval 64 must be a multiple of page_size 128" in result.output
    args = grid_args(trace_path, tmp_path / "out")
    args[args.index("64,256")] = "256"
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "4 points: 0 ran, 4 already done, 0 failed" in result.output


@pytest.mark.parametrize("change, message", [
    (("--policy", "sglang,bogus"), "unknown policy 'bogus'"),
    (("--policy", ""), "--policy: empty list"),
    (("--page-size", "64,"), "--page-size: item 2 of '64,' is empty"),
    (("--window", "-1"), "--window: item 1: must be an integer >= 0"),
])
def test_cli_grid_rejects_bad_lists_with_exit_2(trace_path, tmp_path, change, message):
    args = grid_args(trace_path, tmp_path / "out")
    if change[0] in args:
        args[args.index(change[0]) + 1] = change[1]
    else:
        args += list(change)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_cli_grid_rejects_a_bad_trace_with_exit_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "arrival": 0, "prompt": [{"ref": "x", "len": 0}], "output_len": 4}\n')
    result = CliRunner().invoke(cli, ["grid", "--trace", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output
    missing = CliRunner().invoke(cli, ["grid", "--trace", str(tmp_path / "none.jsonl"), "--out", str(tmp_path)])
    assert missing.exit_code == 2 and "does not exist" in missing.output
