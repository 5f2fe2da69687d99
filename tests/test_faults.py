"""Faults at the edges: a full disk under every writer, stale temporary files, a worker killed mid-point,
a point whose results are not finite, and (slow) the grid killed, interrupted and run twice."""
from __future__ import annotations

import builtins
import dataclasses
import errno
import json
import multiprocessing
import os
import random
import re
import signal

import pytest

import sim.atomic
from benchmarks import grid_faults
from sim.atomic import atomic_write_many, sweep_stale_temps, temp_files
from sim.grid.store import PointStore
from sim.grid.sweep import run_grid
from sim.grid.workers import WORKER_NAME
from sim.trace import write_trace
from sim.trace.generate import s1
from tests.bad_input_helpers import GOOD_LINES, assert_rejected, invoke, lines_text
from tests.test_grid import s1_configs


class _FullDiskFile:
    """A file on a disk that fills up: each write gets half its data down, then ENOSPC."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._f, name)


@pytest.fixture
def full_disk(monkeypatch):
    """Every file opened through sim.atomic (every writer's one path to the disk) is on a full disk."""
    monkeypatch.setattr(sim.atomic, "open", lambda *a, **k: _FullDiskFile(builtins.open(*a, **k)), raising=False)


@pytest.fixture
def trace_path(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(lines_text(*GOOD_LINES))
    return path


@pytest.mark.parametrize("command", ["simulate", "trace gen", "trace import", "grid", "report"])
def test_a_full_disk_is_one_line_naming_the_path_and_leaves_nothing_partial(tmp_path, trace_path, full_disk,
                                                                            command, data_dir):
    out = tmp_path / "out"
    if command == "report":
        with pytest.MonkeyPatch.context() as undo:  # the sweep itself on a healthy disk
            undo.setattr(sim.atomic, "open", builtins.open, raising=False)
            run_grid(trace_path, s1_configs(pages="64", intervals="256", policies="radix"), out, jobs=1,
                     progress=False)
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    args = {"simulate": ["simulate", "--trace", trace_path, "--out", out],
            "trace gen": ["trace", "gen", "s3", "-o", out],
            "trace import": ["trace", "import", "mooncake", data_dir / "mooncake_conversation_head.jsonl", "-o", out],
            "grid": ["grid", "--trace", trace_path, "--policy", "radix", "--out", out, "--jobs", "1"],
            "report": ["report", out]}[command]
    message = assert_rejected(invoke(args), "No space left on device (ENOSPC)", str(out))
    assert not re.search(r"\.\d+\.tmp", message)  # the user's path, not the temporary file's
    if command == "report":
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    elif command == "simulate":
        assert not [p for p in out.rglob("*") if p.is_file()]
    elif command == "grid":  # the folders may be made; no point, no table, no temporary file
        assert not [p for p in out.rglob("*") if p.is_file()]
    else:
        assert not out.exists()
    assert not temp_files(tmp_path)


def test_several_files_are_all_written_or_none(tmp_path, full_disk):
    (tmp_path / "a.csv").write_text("old a\n")
    with pytest.raises(OSError, match="No space left") as caught:
        atomic_write_many({tmp_path / "a.csv": "new a\n", tmp_path / "b.csv": "new b\n"})
    assert caught.value.filename == str(tmp_path / "a.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"] and (tmp_path / "a.csv").read_text() == "old a\n"


def test_calibrate_writes_atomically(tmp_path, full_disk):
    from sim.cost.calibration import Calibration, save_calibration

    target = tmp_path / "cal.json"
    with pytest.raises(OSError):
        save_calibration(Calibration("tiny", "cpu", 1e-3, 1e-6, 1e-6, 1e-9), target)
    assert list(tmp_path.iterdir()) == []


def test_stale_temporary_files_are_swept_and_live_ones_kept(tmp_path):
    points = tmp_path / "points"
    points.mkdir()
    dead = multiprocessing.get_context("spawn").Process(target=os.getpid)
    dead.start()
    dead.join()  # a pid that is gone (reused later, at worst, which keeps the file: the safe side)
    stale = points / f".0123456789abcdef.steps.csv.{dead.pid}.tmp"
    live = points / f".fedcba9876543210.steps.csv.{os.getpid()}.tmp"
    stale.write_text("half")
    live.write_text("being written")
    assert sweep_stale_temps(points) == [stale]
    assert not stale.exists() and live.exists()
    PointStore(tmp_path, create=True)  # a sweep opening its store sweeps too
    assert live.exists()


@pytest.fixture
def s1_trace(tmp_path):
    path = tmp_path / "s1.jsonl"
    write_trace(s1(num_prompts=24, prompt_len=3000, output_len=256), path)
    return path


def test_a_killed_worker_fails_only_its_own_point_and_a_new_worker_takes_the_rest(s1_trace, tmp_path):
    configs = s1_configs(pages="64,128", intervals="128,256")
    killed = []

    def kill_a_busy_worker(outcome):
        workers = [p for p in multiprocessing.active_children() if p.name == WORKER_NAME]
        if not killed and workers:
            killed.append(workers[0].pid)
            os.kill(workers[0].pid, signal.SIGKILL)

    run = run_grid(s1_trace, configs, tmp_path / "out", jobs=2, progress=False, on_outcome=kill_a_busy_worker)
    assert killed and len(run.failed) == 1 and len(run.ran) == len(configs) - 1
    assert "WorkerDied: the worker running this point was killed by SIGKILL" in run.failed[0]["error"]
    assert not [p for p in multiprocessing.active_children() if p.name == WORKER_NAME]
    rerun = run_grid(s1_trace, configs, tmp_path / "out", jobs=2, progress=False)
    assert rerun.ran == [run.failed[0]["key"]] and not rerun.failed
    reference = run_grid(s1_trace, configs, tmp_path / "reference", jobs=1, progress=False)
    assert (tmp_path / "out" / "grid.csv").read_bytes() == (tmp_path / "reference" / "grid.csv").read_bytes()
    assert len(reference.ran) == len(configs)


def test_a_point_with_a_non_finite_result_fails_alone(trace_path, tmp_path, monkeypatch):
    import sim.grid.worker as worker

    real = worker.simulate

    def infinite_for_page_128(trace, config, **given):
        result = real(trace, config, **given)
        if config.knobs.get("page_size") == 128:
            result.summary = dataclasses.replace(result.summary, makespan_s=float("inf"))
        return result

    monkeypatch.setattr(worker, "simulate", infinite_for_page_128)
    run = run_grid(trace_path, s1_configs(pages="64,128", intervals="256", policies="radix"), tmp_path / "out",
                   jobs=1, progress=False)
    assert len(run.ran) == 1 and len(run.failed) == 1
    assert "the summary is not finite (makespan_s = inf)" in run.failed[0]["error"]
    json.loads((tmp_path / "out" / "failed" / f"{run.failed[0]['key']}.json").read_text())  # valid JSON
    assert (tmp_path / "out" / "grid.csv").is_file()


def test_a_damaged_point_record_is_recomputed_not_trusted(trace_path, tmp_path):
    configs = s1_configs(pages="64,128", intervals="256", policies="radix")
    first = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    damaged = PointStore(tmp_path / "out").point_path(first.points[0].key)
    damaged.write_text("{}")
    again = run_grid(trace_path, configs, tmp_path / "out", jobs=1, progress=False)
    assert again.ran == [first.points[0].key] and again.table.equals(first.table)


def test_standard_input_that_is_not_a_trace_leaves_no_copy(tmp_path):
    result = invoke(["grid", "--trace", "-", "--out", tmp_path / "out"],
                    stdin=b'{"id": 1.5, "arrival": 0, "prompt": [], "output_len": 1}\n')
    assert_rejected(result, "<stdin>:1: id:")
    assert not (tmp_path / "out").exists()


# ---- the grid command as a process: kills, Ctrl-C, determinism (slow: each runs real sweeps) -----------
@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_finished_point(tmp_path):
    reference = tmp_path / "reference"
    assert grid_faults.subprocess.run(grid_faults.grid_command(grid_faults.DEFAULT_TRACE, reference)).returncode == 0
    figures = grid_faults.kill_at_random(grid_faults.DEFAULT_TRACE, tmp_path / "killed", 3, random.Random(1),
                                         log=lambda *a: None)
    assert figures["kills"] == 3 and figures["orphans"] == 0 and figures["temp_files_at_end"] == 0, figures
    killed, whole = grid_faults.store_files(tmp_path / "killed"), grid_faults.store_files(reference)
    assert killed.keys() == whole.keys(), sorted(killed.keys() ^ whole.keys())
    assert [name for name in whole if killed[name] != whole[name]] == []


@pytest.mark.slow
def test_ctrl_c_is_one_clean_line_and_leaves_nothing_running(tmp_path):
    result = grid_faults.interrupt(grid_faults.DEFAULT_TRACE, tmp_path / "out", 3.0)
    assert result["returncode"] == 130 and not result["traceback"]
    assert result["message"].startswith("interrupted: ") and "run the same command again" in result["message"]
    assert result["workers_left"] == 0 and result["temp_files"] == 0


@pytest.mark.slow
def test_the_same_commands_twice_give_byte_identical_outputs(tmp_path):
    assert grid_faults.run_twice(grid_faults.DEFAULT_TRACE, tmp_path) == {
        "grid": True, "report": True, "simulate --out": True, "trace import": True}


@pytest.mark.slow
def test_sigterm_to_the_grid_alone_stops_its_workers_too(tmp_path):
    result = grid_faults.interrupt(grid_faults.DEFAULT_TRACE, tmp_path / "out", 3.0, signal.SIGTERM)
    assert result["returncode"] == 143 and not result["traceback"] and result["message"].startswith("interrupted: ")
    assert result["workers_left"] == 0 and result["temp_files"] == 0
