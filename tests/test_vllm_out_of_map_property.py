"""A prefill step's private blocks kept out of vLLM's cache map (``sim/cache/blocks/out_of_map.py``, switch
``OUT_OF_MAP``): the runs' request and step tables and summaries equal the reference's, where every hashed
block is listed; and at each run's end the map with its kept-out blocks put back is the reference's map, block
for block (a kept-out block listed nowhere, its eviction unlisting nothing, all listed at the first preemption).

The private-blocks property's generated traces and configs (fan-outs, multi-turn chats, mixed prompts with
private runs; SWA, Mamba, retention, async; small pools with evictions and, timed, preemptions) and its fixed
cases, with floors: blocks kept out, and a preempted run that lists them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from same_runs import same_both_ways
from test_vllm_private_blocks_property import (
    PREEMPTED,
    PRIVATE_EVICTED,
    SHARED_EVICTED,
    SKIPPED,
    build,
    config_of,
    configs,
    traces,
)

import sim.run.simulate as simulate_module
from sim.cache.blocks import out_of_map
from sim.run.simulate import simulate


def effective_map(pool) -> dict:
    """The pool's map with every block kept out listed again (each under its key alone)."""
    blocks_of = pool.blocks_of
    for block, mark in enumerate(pool.private):
        if mark == out_of_map.KEPT_OUT:
            key = (pool.key_at[block], pool.group_at[block])
            assert key not in blocks_of, f"a kept-out block's key {key} is in the map"
            blocks_of[key] = [block]
    return blocks_of


def run_with(trace_spec, config_spec, keeps_out: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its end's map (with the kept-out blocks), how many blocks
    were kept out then and whether the pool still keeps them out."""
    monkeypatch.setattr(out_of_map, "OUT_OF_MAP", keeps_out)
    run_over = simulate_module._run_over

    def ended(manager, watcher):
        manager.check_integrity()
        pool = manager.pool
        seen[keeps_out] = (
            effective_map(pool),
            pool.private.count(out_of_map.KEPT_OUT),
            pool.keeps_private_out,
        )
        return run_over(manager, watcher)

    monkeypatch.setattr(simulate_module, "_run_over", ended)
    result = simulate(build(trace_spec), config_of(config_spec))
    monkeypatch.setattr(simulate_module, "_run_over", run_over)
    return (), result


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    """Both runs and their maps held equal; what each saw (True: the switch on), and the run."""
    seen: dict = {}
    try:
        on, _ = same_both_ways(lambda on: run_with(trace_spec, config_spec, on, monkeypatch, seen))
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")
    assert seen[True][0] == seen[False][0]
    assert seen[False][1] == 0
    return seen, on[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(trace_spec=PRIVATE_EVICTED[0], config_spec=PRIVATE_EVICTED[1])
@example(trace_spec=SHARED_EVICTED[0], config_spec=SHARED_EVICTED[1])
@example(trace_spec=PREEMPTED[0], config_spec=PREEMPTED[1])
@example(trace_spec=SKIPPED[0], config_spec=SKIPPED[1])
@given(trace_spec=traces, config_spec=configs())
def test_private_blocks_kept_out_of_the_map_leave_the_runs_as_the_reference(
    trace_spec, config_spec, monkeypatch
):
    try:
        seen, result = same_runs(trace_spec, config_spec, monkeypatch)
    except pytest.skip.Exception:
        event("refused")
        return
    event(f"kept out at the end: {bool(seen[True][1])}, still keeping out: {seen[True][2]}")
    event(f"preempted {bool(result.requests['retractions'].sum())}, {trace_spec[0]} {config_spec[0]}")


def test_the_fixed_cases_keep_blocks_out_and_list_them_at_a_preemption(monkeypatch):
    """A replay whose private blocks are kept out at its end; a timed run with preemptions, all listed again."""
    seen, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert seen[True][1] > 0 and seen[True][2], seen[True][1:]
    seen, result = same_runs(*PREEMPTED, monkeypatch)
    assert result.requests["retractions"].sum() > 0
    assert seen[True][1] == 0 and not seen[True][2], seen[True][1:]
