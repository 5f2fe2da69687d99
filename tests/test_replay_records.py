"""A replay's outcomes kept as machine integers (``simulate.REPLAY_RECORDS``, ``sim/run/replay_records.py``) make the
same request table as a ``RequestState`` per request (the reference), and a finished run's why watcher cut to its
misses (``simulate.WATCHER_MISSES_ONLY``) gives the same why column: request and step tables and summary equal,
with closed-loop turns (the replay's order is not the trace's), refused requests, tables built in chunks, and
blocked ranges the watcher explains."""

from __future__ import annotations

import gc
import weakref

import pandas as pd
import pytest
from same_runs import assert_same_run

import sim.run.replay_records as replay_records
import sim.run.simulate as simulate_module
import sim.run.table_chunks as table_chunks
from sim.run.replay import replay_order
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from sim.trace.generate import fanout, multiturn

# every session's first turn, then every second turn, ...: a replay runs a session's turns one after another
TURNS = Trace(
    sorted(
        multiturn(num_sessions=5, num_turns=4, system_len=300, user_len=90, output_len=70, seed=3),
        key=lambda request: int(request.id.rsplit("-t", 1)[1]),
    )
)
FANOUT = fanout(num_groups=3, prompts_per_group=9)
EXPLAINED = {"sglang-retain": "evicted"}  # what the watcher explains there
SMALL = dict(pool_tokens=1400, mamba_states=6)  # pools the runs fill: evictions, blocked ranges, refusals


def _both(trace, config, switch: str, monkeypatch, module=simulate_module):
    """The run with ``module.switch`` on and off: its request table equal, dtypes included, and the rest."""
    on = simulate(trace, config)
    monkeypatch.setattr(module, switch, False)
    off = simulate(trace, config)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(on.requests, off.requests, check_dtype=True, check_exact=True)
    assert_same_run(on, off)
    return on


def _same_table_by_column(trace, config, monkeypatch):
    """The run with the table made a column at a time (``replay_records.TABLE_BY_COLUMN``) and by rows."""
    return _both(trace, config, "TABLE_BY_COLUMN", monkeypatch, replay_records)


@pytest.mark.parametrize("policy", ["sglang-retain", "freetoken", "vllm", "marconi"])
@pytest.mark.parametrize("trace", [TURNS, FANOUT], ids=["turns", "fanout"])
@pytest.mark.parametrize("small", [False, True])
@pytest.mark.parametrize(
    "module, switch",
    [(simulate_module, "REPLAY_RECORDS"), (replay_records, "TABLE_BY_COLUMN")],
    ids=["records", "columns"],
)
def test_the_switched_tables_are_the_reference(policy, trace, small, module, switch, monkeypatch):
    """Replay records against the per-request states, and the table by column against the rows' table."""
    config = SimConfig(policy=policy, mode="replay", bounds=small, **(SMALL if small else {}))
    _both(trace, config, switch, monkeypatch, module)


def test_replay_records_floors(monkeypatch):
    """The cases above reach what they hold equal: an order unlike the trace's, refusals, chunks."""
    assert replay_order(TURNS) != [request.id for request in TURNS]
    refused = simulate(TURNS, SimConfig(policy="sglang-retain", mode="replay", bounds=False, pool_tokens=600))
    assert 0 < (refused.requests["rejected"] != "").sum() < len(TURNS)
    monkeypatch.setattr(simulate_module, "REPLAY_RECORDS", False)
    assert_same_run(
        refused,
        simulate(TURNS, SimConfig(policy="sglang-retain", mode="replay", bounds=False, pool_tokens=600)),
    )
    monkeypatch.setattr(
        table_chunks, "CHUNK_LEN", 4
    )  # several chunks, built again from the rows where they differ
    chunked = _both(
        TURNS,
        SimConfig(policy="freetoken", mode="replay", bounds=False, **SMALL),
        "REPLAY_RECORDS",
        monkeypatch,
    )
    assert chunked.requests.equals(
        simulate(TURNS, SimConfig(policy="freetoken", mode="replay", bounds=False, **SMALL)).requests
    )


@pytest.mark.parametrize("policy", ["sglang-retain", "freetoken", "vllm", "marconi-vllm"])
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_watcher_cut_to_its_misses_gives_the_same_why(policy, mode, monkeypatch):
    config = SimConfig(policy=policy, mode=mode, bounds=False, **SMALL)
    result = _both(TURNS, config, "WATCHER_MISSES_ONLY", monkeypatch)
    if policy in EXPLAINED:  # the watcher explained some of the losses
        assert result.requests["why"].str.contains(EXPLAINED[policy]).any()


def test_the_watchers_tables_are_gone_before_the_tables(monkeypatch):
    """Dead by reference counting (the collector is paused through the run) once the run is over."""
    seen = {}
    run_over, request_table = simulate_module._run_over, simulate_module.replay_request_table

    def cut(manager, watcher):
        try:
            seen["watcher"] = weakref.ref(watcher)
        except TypeError:  # compiled: a native class takes no weak reference
            seen["watcher"] = None
        return run_over(manager, watcher)

    def table(*args):
        seen["alive"] = seen["watcher"] is not None and seen["watcher"]() is not None
        return request_table(*args)

    monkeypatch.setattr(simulate_module, "_run_over", cut)
    monkeypatch.setattr(simulate_module, "replay_request_table", table)
    gc.disable()
    try:
        simulate(FANOUT, SimConfig(policy="freetoken", mode="replay", bounds=False, **SMALL))
    finally:
        gc.enable()
    if seen["watcher"] is None:
        pytest.skip("the compiled watcher takes no weak reference")
    assert seen["alive"] is False


def test_the_table_by_column_floors(monkeypatch):
    """Refusals, an order unlike the trace's, follow-ups with and without a decode-region hit beside first turns
    (None), and a reference made in chunks."""
    config = SimConfig(policy="sglang-retain", mode="replay", bounds=False, pool_tokens=600)
    table = _same_table_by_column(TURNS, config, monkeypatch).requests
    assert 0 < (table["rejected"] != "").sum() < len(TURNS)
    config = SimConfig(policy="sglang-retain", mode="replay", bounds=False)
    hits = _same_table_by_column(TURNS, config, monkeypatch).requests["decode_region_hit"]
    assert hits.isna().any() and set(hits.dropna()) == {True, False}
    monkeypatch.setattr(table_chunks, "CHUNK_LEN", 4)
    _same_table_by_column(
        TURNS, SimConfig(policy="freetoken", mode="replay", bounds=False, **SMALL), monkeypatch
    )
