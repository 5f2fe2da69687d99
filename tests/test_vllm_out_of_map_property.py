"""A prefill step's private blocks kept out of vLLM's cache map (``sim/cache/blocks/out_of_map.py``, switch
``OUT_OF_MAP``): the runs' request and step tables and summaries equal the reference's, where every hashed
block is listed; and at each run's end the map with its kept-out blocks put back is the reference's map, block
for block (a kept-out block listed nowhere, its eviction unlisting nothing, all listed at the first preemption).

The private-blocks property's generated traces and configs (fan-outs, multi-turn chats, mixed prompts with
private runs; SWA, Mamba, retention, async; small pools with evictions and, timed, preemptions) and its fixed
cases, with floors: blocks kept out, and a preempted run that lists them."""

from __future__ import annotations

from hypothesis import event
from test_vllm_private_blocks_property import (
    FIXED,
    PREEMPTED,
    PRIVATE_EVICTED,
    both_ways_or_skip,
    on_fixed_and_generated,
    reached,
    run_seen_at_end,
)

from sim.cache.blocks import lazy_keys, out_of_map


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
    monkeypatch.setattr(lazy_keys, "LAZY_KEYS", False)  # every kept-out block keyed (``lazy_keys.py``'s test)

    def ended(manager, watcher):
        pool = manager.pool
        kept_out = pool.private.count(out_of_map.KEPT_OUT)
        seen[keeps_out] = (effective_map(pool), kept_out, pool.keeps_private_out)

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, ended)


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    """Both runs and their maps held equal; what each saw (True: the switch on), and the run."""
    seen: dict = {}
    on = both_ways_or_skip(lambda on: run_with(trace_spec, config_spec, on, monkeypatch, seen))
    assert seen[True][0] == seen[False][0]
    assert seen[False][1] == 0
    return seen, on[1]


@on_fixed_and_generated(150, *FIXED)
def test_private_blocks_kept_out_of_the_map_leave_the_runs_as_the_reference(
    trace_spec, config_spec, monkeypatch
):
    if (runs := reached(same_runs, trace_spec, config_spec, monkeypatch)) is None:
        return
    seen, result = runs
    event(f"kept out at the end: {bool(seen[True][1])}, still keeping out: {seen[True][2]}")
    event(f"preempted {bool(result.requests['retractions'].sum())}, {trace_spec[0]} {config_spec[0]}")


def test_the_fixed_cases_keep_blocks_out_and_list_them_at_a_preemption(monkeypatch):
    """A replay whose private blocks are kept out at its end; a timed run with preemptions, all listed again."""
    seen, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert seen[True][1] > 0 and seen[True][2], seen[True][1:]
    seen, result = same_runs(*PREEMPTED, monkeypatch)
    assert result.requests["retractions"].sum() > 0
    assert seen[True][1] == 0 and not seen[True][2], seen[True][1:]
