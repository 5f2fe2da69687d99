"""Progress from the start and inside every point, and refusals before any work (issue 25, item 4)."""

from __future__ import annotations

import io
import sys
import time

import pytest
from click.testing import CliRunner

import sim.progress
from cli import cli
from sim.grid.axes import expand, parse_axes
from sim.grid.sweep import run_grid
from sim.progress import progress


def test_a_log_gets_a_line_while_nothing_moves():
    """A long step, or the bounds after the run: the heartbeat prints the last state with its note."""
    stream = io.StringIO()
    with progress(10, "simulating", "requests", stream=stream, interval_s=0.2) as update:
        update(3, "computing the offline bounds")
        time.sleep(0.7)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("simulating: 3 / 10 requests (30%)")
    assert lines[0].endswith("; computing the offline bounds") and ", finished" in lines[-1]


def test_a_sweep_shows_the_requests_of_the_point_in_flight(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sim.progress, "LOG_INTERVAL_S", 0.05)
    configs = expand(parse_axes({"policy": "sglang,sglang-retain", "model": "qwen3.5-4b"}))
    run_grid("traces/multiturn.jsonl", configs, tmp_path / "out", jobs=1, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("grid: ") and " / 640 requests " in line for line in lines)
    inside = [line for line in lines if "; 0 / 2 points" in line and not line.startswith("grid: 0 /")]
    assert inside, lines  # the first point's requests moved the count before it finished


def test_parquet_without_pyarrow_is_refused_before_the_sweep(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # importing it fails, as where it is not installed
    result = CliRunner().invoke(
        cli,
        ["grid", "--trace", "traces/fanout.jsonl", "--out", str(tmp_path / "g"), "--table-format", "parquet"],
    )
    assert result.exit_code == 2 and "needs pyarrow" in result.output
    assert not (tmp_path / "g").exists()  # nothing ran, nothing was written


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--trace", "traces/fanout.jsonl", "--out", "{file}"],
        ["simulate", "--trace", "traces/fanout.jsonl", "--out", "{file}/sub"],
        ["grid", "--trace", "traces/fanout.jsonl", "--out", "{file}"],
        ["calibrate", "--trace", "traces/fanout.jsonl", "-o", "{file}/cal.json"],
        ["execute", "--trace", "traces/fanout.jsonl", "--out", "{file}"],
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_at_once(tmp_path, args):
    (tmp_path / "a-file").write_text("x")
    started = time.monotonic()
    result = CliRunner().invoke(cli, [a.format(file=tmp_path / "a-file") for a in args])
    assert result.exit_code == 2, result.output
    assert ("not a folder" in result.output or "is a file" in result.output) and "a-file" in result.output
    assert time.monotonic() - started < 5  # refused before any simulation


def test_worker_processes_report_their_point_before_it_ends():
    """The driver hears from each worker while its point runs (the sweep's count moves inside a point)."""
    from sim.grid.points import config_to_dict, file_sha256
    from sim.grid.worker import PointTask
    from sim.grid.workers import run_workers
    from sim.run.config import SimConfig

    sha = file_sha256("traces/fanout.jsonl")
    tasks = [PointTask(f"p{i}", config_to_dict(SimConfig(policy=policy, mode="replay", bounds=False)),
                       "traces/fanout.jsonl", sha) for i, policy in enumerate(("sglang", "sglang-retain"))]
    heard: list[tuple[str, int]] = []
    finished = []
    for outcome in run_workers(tasks, 2, lambda key, done: heard.append((key, done))):
        assert outcome.ok, outcome.error
        finished.append(outcome.key)
        assert any(key == outcome.key for key, _ in heard)  # heard from before its outcome came
    assert sorted(finished) == ["p0", "p1"] and all(done < 128 for _, done in heard[:2])
