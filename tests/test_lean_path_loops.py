"""The lean passes over a request's path (FreeToken's pure replay spends its growth there: paths of a hundred
nodes and more late in a run), each switch on against its reference:

- ``locks.LEAN_LOOPS``: the FULL passes count unlocked tokens in a local; ``unlock`` on a tree whose strategy
  hears only of leaves tells it of the holder's node and the window's childless nodes alone;
- ``freetoken_insert.LOCAL_TICKS``: the revives past the frontier's node keep the clock's tick in a local;
- ``matching.LEAN_SCAN``: ``deepest_acceptable`` with SWA and MAMBA reads a node's state first;
- ``freetoken_frees.COUNT_RUNS``: a trim's run of tombstones on a counting pool counts as it goes.

As a property over generated runs (FreeToken's: ``test_freetoken_page_lists.page_cases``, SWA, SWA + GDN and GDN
models, the three presets, short windows, pages 1 to 64, small pools, replay and timed, bounds on and off, on
real ids and on anonymous ones; and SGLang's and Marconi's presets, whose trees hear of every release): every
id every pool hands out, every FreeToken insert's path as it ends (tombstones, locks, stamps, the clock), every
tree's nodes as the run ends (span, pages, stamp, locks, tombstone cause), its counts and its heaps, and the
run's tables equal the reference's. The locks alone, operation by operation: tests/test_lean_locks_property.py.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_page_lists import page_cases
from test_matching_property import node_shapes, path_of

import sim.cache.engines.freetoken_frees as frees
import sim.cache.engines.freetoken_gdn as ft_gdn
import sim.cache.engines.freetoken_insert as insert
import sim.cache.engines.freetoken_swa as ft_swa
import sim.cache.locks as locks
import sim.cache.matching as matching
import sim.cache.tree_runs as tree_runs
from sim.cache.misses import TreeMissTracker
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace import load_trace
from sim.trace.generate import multiturn

POOL_ALLOC, DISMANTLE, WATCHER_INIT = Pool.alloc, RadixTree.dismantle, TreeMissTracker.__post_init__
INSERT_SWA = insert.insert_swa
SWITCHES = (
    (locks, "LEAN_LOOPS"),
    (insert, "LOCAL_TICKS"),
    (matching, "LEAN_SCAN"),
    (frees, "COUNT_RUNS"),
)


def tree_state(tree: RadixTree, causes: dict) -> list:
    """The tree's nodes, by place (the two runs' nodes are different objects), its counts and its heaps."""
    nodes = sorted(tree.nodes(), key=lambda n: (n.start, n.end, n.full_stamp))
    heaps = getattr(tree.eviction, "heaps", {})
    return [
        [
            (n.start, n.end, n.swa_pages, n.full_stamp, n.full_lock, sorted(n.swa_holders), causes.get(n))
            for n in nodes
        ],
        (tree.num_swa_pages, tree.num_unlocked_tokens, tree.full_pool.num_free, tree.swa_pool.num_free),
        {comp: sorted((stamp, n.start, n.end) for stamp, _, n in heap) for comp, heap in heaps.items()},
    ]


def run_logged(trace, config, lean: bool, anonymous: bool, monkeypatch) -> tuple[list, object]:
    """The run, every allocation's ids, every insert's path as it ends, and every tree's state as the run ends."""
    log: list = []
    watchers: list = []

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        log.append((pool.name, list(ids)))
        return ids

    def kept_watcher(watcher):
        WATCHER_INIT(watcher)
        watchers.append(watcher)

    def logged_insert(tree, req, end, clock, has_swa=True):  # each insert's path: pages, locks and stamps
        node = INSERT_SWA(tree, req, end, clock, has_swa)
        path = node.path_from_root()
        log.append([(n.end, n.swa_pages is None, n.full_lock, n.full_stamp) for n in path] + [clock.events])
        return node

    def logged_dismantle(tree):  # the run throws its tree away at its end: its state is logged first
        log.append(tree_state(tree, {n: c for w in watchers for n, c in w.tomb_cause.items()}))
        DISMANTLE(tree)

    for module, name in SWITCHES:
        monkeypatch.setattr(module, name, lean)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", anonymous)  # real ids: compared; anonymous: counted
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(RadixTree, "dismantle", logged_dismantle)
    monkeypatch.setattr(ft_swa, "insert_swa", logged_insert)
    monkeypatch.setattr(ft_gdn, "insert_swa", logged_insert)
    monkeypatch.setattr(TreeMissTracker, "__post_init__", kept_watcher)
    return log, simulate(trace, config)


def assert_lean_equal(trace, config, anonymous: bool, monkeypatch) -> None:
    same_both_ways(lambda lean: run_logged(trace, config, lean, anonymous, monkeypatch))


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), anonymous=st.booleans())
def test_freetoken_runs_equal_the_reference(case, anonymous, monkeypatch):
    trace, config = case
    assert_lean_equal(trace, config, anonymous, monkeypatch)  # a configuration FreeToken refuses: rejected


def small_trace(seed: int, num_turns: int = 4):
    return multiturn(
        num_sessions=4,
        num_turns=num_turns,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=seed,
    )


@pytest.mark.interpreted
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    policy=st.sampled_from(["sglang", "radix", "sglang-retain", "marconi", "marconi-sglang", "marconi-vllm"]),
    model=st.sampled_from(["gemma-4-26b-a4b", "inkling", "qwen3-next"]),
    page=st.sampled_from([1, 16]),
    seed=st.integers(0, 1_000),
    mode=st.sampled_from(["replay", "timed"]),
)
def test_other_engines_runs_equal_the_reference(policy, model, page, seed, mode, monkeypatch):
    """The shared passes (locks, the match's scan) under trees that hear of every release."""
    config = SimConfig(
        policy=policy,
        model=model,
        knobs=dict(page_size=page),
        pool_tokens=3_000 // page * page,
        mamba_states=16,
        mode=mode,
        bounds=False,
    )
    assert_lean_equal(small_trace(seed), config, False, monkeypatch)  # a configuration refused: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("anonymous, mode", [(False, "replay"), (True, "replay"), (True, "timed")])
def test_the_real_trace_revives_and_trims_long_runs(anonymous, mode, monkeypatch):
    """A test of the case: on the repository's 500 Mooncake requests the inserts revive dozens of nodes past the
    frontier's and the trims tombstone runs as long (the generated runs' paths are short); and there the lean
    passes equal the reference."""
    revived: list[int] = []
    trimmed: list[int] = []
    revive_below, tombstone_doomed = insert._revive_below, frees.tombstone_doomed
    monkeypatch.setattr(
        tree_runs, "RUN_NODES", False
    )  # the per-node tree's long runs (run nodes step them once)

    def counted_revives(tree, path, at, *args):
        revived.append(sum(n.swa_pages is None and n.full_lock == 0 for n in path[at:]))
        revive_below(tree, path, at, *args)

    def counted_trims(tree, nodes, pool_frees):
        trimmed.append(len(nodes))
        tombstone_doomed(tree, nodes, pool_frees)

    monkeypatch.setattr(insert, "_revive_below", counted_revives)
    monkeypatch.setattr("sim.cache.engines.freetoken_swa.tombstone_doomed", counted_trims)
    config = SimConfig(policy="freetoken-budget", mode=mode, bounds=False)
    assert_lean_equal(load_trace("traces/mooncake_conversation_500.jsonl"), config, anonymous, monkeypatch)
    assert max(revived) > 20
    assert max(trimmed) > 20


@settings(max_examples=400, deadline=None)
@given(st.lists(node_shapes, max_size=14), st.integers(-5, 120))
@example([(30, True, True), (5, False, True), (10, True, True), (10, True, True)], 25)  # a short run: above
@example([(30, True, True), (5, False, True), (10, True, True), (10, True, True)], 20)  # the deep run holds
@example([(10, True, False), (10, True, True), (10, True, False), (10, False, False)], 5)  # stateless tail
@example([(10, False, True), (10, True, True)], 15)  # a tombstone holding a state
def test_the_lean_scan_equals_the_reference(shapes, window):
    path = path_of(shapes)
    lean = matching.deepest_acceptable(path, window, True, True)
    try:
        matching.LEAN_SCAN = False
        assert lean is matching.deepest_acceptable(path, window, True, True)
    finally:
        matching.LEAN_SCAN = True


def test_the_pinned_scans():
    """The examples above, answered by hand (so the reference itself is pinned too)."""
    short = path_of([(30, True, True), (5, False, True), (10, True, True), (10, True, True)])
    assert matching.deepest_acceptable(short, 25, True, True) is short[0]
    assert matching.deepest_acceptable(short, 20, True, True) is short[3]
    tail = path_of([(10, True, False), (10, True, True), (10, True, False), (10, False, False)])
    assert matching.deepest_acceptable(tail, 5, True, True) is tail[1]
    stateful_tombstone = path_of([(10, False, True), (10, True, True)])
    assert matching.deepest_acceptable(stateful_tombstone, 15, True, True) is None
