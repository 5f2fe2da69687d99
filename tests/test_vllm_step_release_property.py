"""A step's releases taken a kind's groups at once (``sim/cache/blocks/step_release.py``, switch ``BY_KIND``)
against the reference, ``steps.release_skipped`` asking each group alone.

Directly: generated tables for three SWA, a FULL and three Mamba groups (a kind's groups of one shape, or each
its own: the reference taken then), retired counts, hashed positions (``num_cached``, a hit), hashed Mamba
states among the freed ones, and a step's processed tokens: the tables, retired counts, free queue, reference
counts and per-kind counters held equal. Whole runs: the private-blocks property's generated traces and configs
and the Mooncake head (the ``vllm`` preset's three SWA and four Mamba groups), replayed and timed, and in a small
pool: tables, summary, and the pool and watcher as each run ends held equal. The path is shown taken (the
module's ``TAKEN`` counts, and the head's windows and states each released a kind at once)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_vllm_private_blocks_property import build, config_of, configs, traces

import sim.run.simulate as simulate_module
from sim.cache.blocks import step_release, steps
from sim.cache.blocks.hashed_positions import HashedPositions
from sim.cache.blocks.hit import Hit
from sim.cache.blocks.keys import KeyChain
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.out_of_map import Unkeyed
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.results import MatchResult
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace.azure_import import import_mooncake

HEAD = Path(__file__).parent / "data" / "mooncake_conversation_head.jsonl"  # the first 40 Mooncake lines
KINDS = ("swa", "swa", "swa", "full", "mamba", "mamba", "mamba")
LAYOUT = Layout(4, KINDS, 0, 10, 0)  # blocks of 4 tokens, a window of 10


def _request(pool: BlockPool, shapes, retired, num_cached, hit_tokens, hashed_states) -> BlockRequest:
    """Tables of held blocks and nulls as ``shapes`` say; the Mamba blocks ``hashed_states`` names hashed."""
    tables: list[list[int | None]] = []
    for group, live in enumerate(shapes):
        blocks = iter(pool.get_new_blocks(sum(live), group))
        tables.append([next(blocks) if held else None for held in live])
    for group in range(4, 7):
        held = [block for block in tables[group] if block is not None]
        for at in hashed_states:
            if held and at % 7 == group:
                pool.cache_in(held[at % len(held)], ("state", group, at), group)
    return BlockRequest(
        "r",
        TokenSeq([]),
        1,
        MatchResult(0, 0, None),
        Hit(hit_tokens, 0, 0),
        KeyChain(),
        tables,
        [min(num, len(table)) for num, table in zip(num_cached, tables, strict=True)],
        [min(r, len(t)) for r, t in zip(retired, tables, strict=True)],
    )


shape = st.lists(st.booleans(), max_size=14)


@st.composite
def kind_shapes(draw):
    """A shape a group: a kind's groups mostly one shape (the fast path), some with one slot flipped (as long,
    a null or a block where the others differ), some each its own."""
    swa, mamba = draw(shape), draw(shape)
    shapes = []
    for group in range(7):
        kind_shape = swa if group < 3 else mamba if group > 3 else []
        how = draw(st.sampled_from(["same", "same", "flipped", "own"]))
        if how == "own":
            kind_shape = draw(shape)
        elif how == "flipped" and kind_shape:
            at = draw(st.integers(0, len(kind_shape) - 1))
            kind_shape = [*kind_shape[:at], not kind_shape[at], *kind_shape[at + 1 :]]
        shapes.append(kind_shape)
    return shapes


def released_alike(shapes, retired, num_cached, hit_tokens, hashed_states, processed, retention) -> tuple:
    """The step released a kind at once and by the reference from equal starts, held equal; what the fast
    side took (windows, states released a kind at once) and whether a hashed block was freed."""
    pools = BlockPool(120, KINDS), BlockPool(120, KINDS)
    reqs = [_request(pool, shapes, retired, num_cached, hit_tokens, hashed_states) for pool in pools]
    positions = HashedPositions(LAYOUT, retention)
    before = dict(step_release.TAKEN)
    step_release.release_step(LAYOUT, pools[0], reqs[0], processed, False, positions)
    steps.release_skipped(LAYOUT, pools[1], reqs[1], processed, False, positions)
    assert (reqs[0].tables, reqs[0].retired) == (reqs[1].tables, reqs[1].retired)
    assert pools[0].queue() == pools[1].queue() and pools[0].ref_counts() == pools[1].ref_counts()
    assert (pools[0].held, pools[0].cached_free) == (pools[1].held, pools[1].cached_free)
    taken = tuple(step_release.TAKEN[path] - before[path] for path in ("windows", "states", "each"))
    return taken, dict(pools[0].cached_free)


step_args = (
    kind_shapes(),
    st.lists(st.integers(0, 14), min_size=7, max_size=7),
    st.lists(st.integers(0, 14), min_size=7, max_size=7),
    st.integers(0, 40),
    st.lists(st.integers(0, 60), max_size=3),
    st.integers(0, 70),
    st.sampled_from([None, 0, 8]),
)


@settings(max_examples=400, deadline=None)
@given(*step_args)
def test_a_step_releases_as_the_reference(
    shapes, retired, num_cached, hit_tokens, hashed_states, processed, retention
):
    released_alike(shapes, retired, num_cached, hit_tokens, hashed_states, processed, retention)


def test_generated_steps_take_each_path():
    """Floors over 300 steps drawn alike (seeded): windows and states released a kind at once, hashed blocks
    among a kind's windows, hashed states freed, and windows of another shape taken by the reference."""
    seen = {"windows": 0, "states": 0, "each": 0, "hashed windows": 0, "hashed states": 0}
    for seed in range(300):
        found = _drawn(seed)
        taken, cached_free = released_alike(*found)
        seen["windows"] += taken[0]
        seen["states"] += taken[1]
        seen["each"] += taken[2]
        seen["hashed windows"] += bool(taken[0] and cached_free["swa"])
        seen["hashed states"] += bool(cached_free["mamba"])
    assert all(count >= 5 for count in seen.values()), seen


def _drawn(seed: int) -> tuple:
    """A step's start drawn from ``seed`` as the property draws one, its kinds' groups one shape."""
    rng = random.Random(seed)
    swa = [rng.random() < 0.8 for _ in range(rng.randrange(15))]
    mamba = [rng.random() < 0.3 for _ in range(rng.randrange(15))]
    shapes = [swa if g < 3 else mamba if g > 3 else [] for g in range(7)]
    if seed % 4 == 0 and swa:  # one SWA group with a slot flipped: the reference, group by group
        at, flipped = rng.randrange(len(swa)), list(swa)
        flipped[at] = not flipped[at]
        shapes[rng.randrange(3)] = flipped
    cached = rng.randrange(15)
    retired = [rng.randrange(15) for _ in range(3)] + [0] + [rng.randrange(3)] * 3
    hashed_states = [rng.randrange(60) for _ in range(rng.randrange(3))]
    retention = rng.choice([None, 0, 8])
    hit_tokens, num_cached = rng.randrange(40), [cached] * 7
    if seed % 4 == 1 and swa:  # one SWA group hashed one block further or less, below the window (no hit,
        # every block hashed): its hashed runs its own
        hit_tokens, retention, cached = 0, None, rng.randrange(len(swa))
        num_cached = [cached] * 7
        num_cached[rng.randrange(3)] = max(0, cached + rng.choice([-1, 1]))
    return shapes, retired, num_cached, hit_tokens, hashed_states, rng.randrange(70), retention


def pool_state(manager, watcher) -> tuple:
    """What a run leaves in the pool and the watcher (a kept-out block's ``Unkeyed`` mark named)."""
    pool = manager.pool
    keys = {
        block: ("unkeyed" if isinstance(key, Unkeyed) else key, group)
        for block, (key, group) in pool.key_of.items()
    }
    counters = (pool.held, pool.cached_free, pool.num_evictions)
    return (
        pool.queue(),
        keys,
        pool.ref_cnt,
        list(pool.private),
        pool.blocks_of,
        counters,
        getattr(watcher, "evicted", None),
    )


def watched_run(trace, config, on: bool, monkeypatch) -> tuple:
    """The run with the switch set: its end state, its result, the steps released a kind at once."""
    monkeypatch.setattr(step_release, "BY_KIND", on)
    monkeypatch.setattr(step_release, "TAKEN", {"windows": 0, "states": 0, "each": 0})
    run_over, ended = simulate_module._run_over, []

    def at_end(manager, watcher):
        manager.check_integrity()
        ended.append(pool_state(manager, watcher))
        return run_over(manager, watcher)

    monkeypatch.setattr(simulate_module, "_run_over", at_end)
    result = simulate(trace, config)
    monkeypatch.setattr(simulate_module, "_run_over", run_over)
    return ended, result, dict(step_release.TAKEN)


def same_runs(trace, config, monkeypatch) -> dict:
    """Both runs and their end states held equal; the switch-on run's count of steps released a kind at once."""
    on, off = same_both_ways(lambda switch: watched_run(trace, config, switch, monkeypatch))
    assert off[2] == {"windows": 0, "states": 0, "each": 0}, off[2]  # off: the reference alone
    return on[2]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(trace_spec=("multiturn", (3, 4, 200, 48, 60, 0)), config_spec=("replay", "tiny-swa", {}, 20000))
@example(
    trace_spec=("fanout", (2, 8, 300, 60, 200)),
    config_spec=("timed", "inkling", {"async_scheduling": True, "retention_interval": 0}, 2000),
)
@given(trace_spec=traces, config_spec=configs())
def test_runs_release_as_the_reference(trace_spec, config_spec, monkeypatch):
    try:
        same_runs(build(trace_spec), config_of(config_spec), monkeypatch)
    except ValueError:  # the pool cannot hold one max_model_len request (both runs refuse alike)
        pytest.skip("refused")


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_the_real_head_releases_a_kind_at_once(mode, monkeypatch):
    """The ``vllm`` preset on the Mooncake head: its three SWA and four Mamba groups released a kind at once."""
    trace = import_mooncake(str(HEAD), chains=True)
    taken = same_runs(trace, SimConfig(policy="vllm", mode=mode, bounds=False), monkeypatch)
    assert taken["windows"] >= 40 and taken["states"] >= 40, taken


def test_a_small_pool_evicts_and_releases_alike(monkeypatch):
    """The head in a pool of a few hundred blocks: evictions and refusals while a kind is released at once."""
    trace = import_mooncake(str(HEAD), limit=20, chains=True)
    config = SimConfig(policy="vllm", mode="timed", bounds=False, pool_tokens=60000)
    ended = watched_run(trace, config, True, monkeypatch)[0]
    taken = same_runs(trace, config, monkeypatch)
    assert taken["windows"] >= 10 and sum(ended[0][5][2].values()) >= 100, (taken, ended[0][5])
