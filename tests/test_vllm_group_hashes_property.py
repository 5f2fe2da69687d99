"""A group whose mask accepts none of a step's newly full blocks is not asked to hash (``sim/cache/blocks/
group_hashes.py``, switch ``SKIP_EMPTY``): the runs with the switch on and off are held equal (request and step
tables, summary) and so is the whole pool and watcher as each run ends (the free queue in order, every hashed
block's key and group, reference counts, private marks, the per-kind counters, the evicted keys watched).

Generated traces and configs are the private-blocks property's (fan-outs, multi-turn chats, mixed prompts; models
with SWA, Mamba or both, retention None / 0 / a block / three blocks, async scheduling, pools from a few dozen
blocks to roomy; replay and timed), and the real trace's head. The path is shown taken: with the switch on no
group is asked with an empty mask, and fewer are asked than with it off, where the empty ones are."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_vllm_private_blocks_property import build, config_of, configs, traces

import sim.run.simulate as simulate_module
from sim.cache.blocks import group_hashes
from sim.cache.blocks.out_of_map import Unkeyed
from sim.run.simulate import SimConfig, simulate
from sim.trace.azure_import import import_mooncake

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

HEAD = Path(__file__).parent / "data" / "mooncake_conversation_head.jsonl"  # the first 40 Mooncake lines


def pool_state(manager, watcher) -> tuple:
    """What a run leaves in the pool and the watcher (a kept-out block's ``Unkeyed`` mark named, not compared by
    identity: each run makes its own)."""
    pool = manager.pool
    keys = {
        block: ("unkeyed" if isinstance(key, Unkeyed) else key, group)
        for block, (key, group) in pool.key_of.items()
    }
    counters = (pool.held, pool.cached_free, pool.num_evictions)
    evicted = getattr(watcher, "evicted", None)
    return pool.queue(), keys, pool.ref_cnt, list(pool.private), pool.blocks_of, counters, evicted


def watched_run(trace, config, on: bool, monkeypatch) -> tuple:
    """The run with the switch set: (the group hashings asked and the empty ones among them, the end state),
    its result, as ``same_both_ways`` takes them."""
    monkeypatch.setattr(group_hashes, "SKIP_EMPTY", on)
    hash_group, run_over, asked = group_hashes.hash_group, simulate_module._run_over, {"all": 0, "empty": 0}
    ended: list = []

    def counted(pool, keys, req, group, keys_of, stride, indices, *rest):
        asked["all"] += 1
        asked["empty"] += not indices
        hash_group(pool, keys, req, group, keys_of, stride, indices, *rest)

    def at_end(manager, watcher):
        manager.check_integrity()
        ended.append(pool_state(manager, watcher))
        return run_over(manager, watcher)

    monkeypatch.setattr(group_hashes, "hash_group", counted)
    monkeypatch.setattr(simulate_module, "_run_over", at_end)
    result = simulate(trace, config)
    monkeypatch.setattr(group_hashes, "hash_group", hash_group)
    monkeypatch.setattr(simulate_module, "_run_over", run_over)
    return ended, result, asked


def same_runs(trace, config, monkeypatch) -> tuple[dict, dict, tuple]:
    """Both runs held equal, their end states too; the group hashings each asked (on, off), the end state."""
    on, off = same_both_ways(lambda switch: watched_run(trace, config, switch, monkeypatch))
    assert on[2]["empty"] == 0, on[2]  # none asked with nothing to hash
    assert on[2]["all"] == off[2]["all"] - off[2]["empty"], (on[2], off[2])
    return on[2], off[2], on[0][0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(trace_spec=("multiturn", (3, 4, 200, 48, 60, 0)), config_spec=("replay", "tiny-swa", {}, 20000))
@example(
    trace_spec=("fanout", (2, 8, 300, 60, 200)),
    config_spec=("timed", "inkling", {"async_scheduling": True, "retention_interval": 0}, 2000),
)
@given(trace_spec=traces, config_spec=configs())
def test_skipping_empty_masks_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    try:
        same_runs(build(trace_spec), config_of(config_spec), monkeypatch)
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_the_real_head_skips_most_swa_and_mamba_hashings(mode, monkeypatch):
    """The ``vllm`` preset on the Mooncake head: its SWA and Mamba groups' masks often empty."""
    trace = import_mooncake(str(HEAD), chains=True)
    on, off, _ = same_runs(trace, SimConfig(policy="vllm", mode=mode, bounds=False), monkeypatch)
    assert off["empty"] >= 100, (on, off)


def test_a_small_pool_evicts_and_skips_alike(monkeypatch):
    """The head in a pool of a few hundred blocks: evictions and refusals while masks are skipped."""
    trace = import_mooncake(str(HEAD), limit=20, chains=True)
    config = SimConfig(policy="vllm", mode="timed", bounds=False, pool_tokens=60000)
    on, off, (_, _, _, _, _, counters, _) = same_runs(trace, config, monkeypatch)
    assert off["empty"] >= 20 and sum(counters[2].values()) >= 100, (on, off, counters)
