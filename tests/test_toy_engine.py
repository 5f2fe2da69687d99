"""An engine is one module and one registry line: a toy engine (a FULL radix cache evicting first in, first
out, ``tests/toy_engine.py``) registered here runs through the knob schema, ``policies``, ``simulate`` and
``grid`` with nothing else changed; registered through ``$HYBRIDCACHE_ENGINES`` it also runs in every process
of a command (a grid's workers), with its own knob as a CLI option and a grid axis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands.main import cli
from sim.engines.registry import KNOBS, PRESETS, make_policy, register, unregister
from sim.grid.axes import expand, parse_axes
from sim.grid.sweep import run_grid
from sim.run.config import SimConfig
from sim.run.simulate import simulate
from sim.trace import write_trace
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace
from tests import toy_engine

REPO = Path(__file__).resolve().parents[1]
# a hot prompt sent again between cold ones, on a pool of two and a half prompts: LRU keeps the hot one (it is
# the most recently used), FIFO evicts it once it is the oldest
TRACE = Trace(
    [
        Request(
            id=f"{kind}{i}",
            arrival=2.0 * i + (kind == "cold"),
            prompt=[Segment(ref=ref, len=1024)],
            output_len=1,
        )
        for i in range(8)
        for kind, ref in (("hot", "hot"), ("cold", f"cold{i}"))
    ]
)
SMALL = dict(pool_tokens=2560, mode="replay", bounds=False)


@pytest.fixture
def toy():
    register(toy_engine.ENGINE)  # the one registry line
    yield toy_engine.ENGINE
    unregister(toy_engine.ENGINE.name)


def test_the_schema_and_the_presets_take_the_engine_and_its_knob(toy):
    assert "radix-fifo" in PRESETS and list(PRESETS)[-1] != "radix-fifo"  # the negative controls stay last
    assert KNOBS["fifo_spare_nodes"].engines == ("fifo",)
    assert make_policy("radix-fifo", fifo_spare_nodes=3).own == toy_engine.FifoKnobs(fifo_spare_nodes=3)
    with pytest.raises(ValueError, match="--fifo-spare-nodes applies to fifo policies only"):
        make_policy("sglang", fifo_spare_nodes=3)


def test_gone_once_unregistered():
    register(toy_engine.ENGINE)
    unregister(toy_engine.ENGINE.name)
    assert "radix-fifo" not in PRESETS and "fifo_spare_nodes" not in KNOBS
    with pytest.raises(ValueError, match="unknown policy 'radix-fifo'"):
        make_policy("radix-fifo")


def test_it_simulates_and_evicts_its_own_way(toy):
    fifo = simulate(TRACE, SimConfig(policy="radix-fifo", **SMALL))
    lru = simulate(TRACE, SimConfig(policy="radix", **SMALL))
    assert fifo.summary.evictions_full > 0 and lru.summary.evictions_full > 0
    assert (fifo.summary.hits, lru.summary.hits) == (6, 7)  # FIFO evicted the hot prompt once more
    timed = simulate(TRACE, SimConfig(policy="radix-fifo", pool_tokens=2560, bounds=True))
    assert timed.summary.requests == len(TRACE) and timed.summary.bound_tokens is not None


def test_policies_and_simulate_on_the_command_line(toy, tmp_path):
    listed = CliRunner().invoke(cli, ["policies"])
    assert listed.exit_code == 0 and "radix-fifo" in listed.output and "fifo_spare_nodes 0" in listed.output
    path = tmp_path / "t.jsonl"
    write_trace(TRACE, path)
    ran = CliRunner().invoke(
        cli, ["simulate", "--trace", str(path), "--policy", "radix-fifo", "--format", "json"]
    )
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["summary"]["requests"] == len(TRACE)


def test_a_grid_runs_it(toy, tmp_path):
    path = tmp_path / "t.jsonl"
    write_trace(TRACE, path)
    configs = expand(parse_axes({"policy": "radix,radix-fifo", "pool_tokens": "2560,4096"}), mode="replay")
    run = run_grid(path, configs, tmp_path / "grid", jobs=1, progress=False)
    assert len(run.ran) == 4 and not run.failed


def test_registered_by_environment_it_runs_in_every_process_of_a_command(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trace(TRACE, path)
    env = os.environ | {"HYBRIDCACHE_ENGINES": "tests.toy_engine", "PYTHONPATH": str(REPO)}
    common = ["--trace", str(path), "--policy", "radix-fifo", "--pool-tokens", "2560", "--mode", "replay"]
    simulate_cli = [
        sys.executable,
        "cli.py",
        "simulate",
        *common,
        "--fifo-spare-nodes",
        "2",
        "--format",
        "json",
    ]
    done = subprocess.run(simulate_cli, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved"]["knobs"]["fifo_spare_nodes"] == 2
    grid = [
        sys.executable,
        "cli.py",
        "grid",
        *common,
        "--fifo-spare-nodes",
        "0,2",
        "--out",
        str(tmp_path / "g"),
    ]
    done = subprocess.run(
        [*grid, "--jobs", "2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "g" / "points").glob("*.requests.csv"))) == 2
