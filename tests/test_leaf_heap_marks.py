"""FreeToken's ``LeafHeap`` skips a push whose node is already queued at that stamp (``SKIP_QUEUED``, a mark per
queued node, taken off as its entry is popped and rebuilt at compaction); the reference queues every push. A heap
pops the least of its valid entries, and a skipped push is the same tuple as one still queued, so the pops must be
the same. As properties: two heaps given the same generated operations (pushes, releases, restamps, children,
locks, deaths, pops that evict what they return; a node that loses its child or its lock released, as the tree
does; compaction every few pushes) pop the same nodes, switch on
against off; generated FreeToken runs (``test_freetoken_leaf_heap.cases``: three presets, three models, pages 1 /
2 / 16, small pools, replay and timed, real ids) log the same evictions (tokens freed, the FULL pool's free-id
stack after each, the eviction count) and tables with the switch on and off. Fixed cases hold floors, counted in
their own run: pushes are skipped and pops return nodes.
"""

from __future__ import annotations

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases, logged

import sim.cache.engines.freetoken_common as common
import sim.cache.engines.freetoken_tree as freetoken_tree
from sim.cache.components import FULL, Component
from sim.cache.engines.freetoken_tree import LeafHeap, evict_full
from sim.cache.eviction import LRUEviction
from sim.cache.node import Node
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

NUM_NODES = 6
OPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["push", "release", "restamp", "pop"]), st.integers(0, NUM_NODES - 1)),
        st.tuples(st.sampled_from(["child", "lock", "kill"]), st.integers(0, NUM_NODES - 1), st.booleans()),
    ),
    max_size=120,
)
# every node pushed twice (the second skipped where no compaction took the first's twin first), a pop, a release of a leaf still queued, a restamp, pops
FIXED_OPS = [("push", i) for i in range(NUM_NODES)] * 2 + [("pop", 0), ("release", 1), ("restamp", 2)]
FIXED_OPS += [("lock", 3, True), ("pop", 0), ("pop", 0), ("lock", 3, False), ("release", 3), ("pop", 0)]
# a queued node given a child, its entry dropped by a compaction, then a leaf again: its release must queue it anew
COMPACTED_OPS = [
    ("push", 0),
    ("child", 0, True),
    ("push", 1),
    ("push", 2),
    ("child", 0, False),
    ("release", 0),
]
COMPACTED_OPS += [("pop", 0)]


def _unlocked_leaf(node: Node) -> bool:
    return not node.children and node.full_lock == 0


def _heap() -> LeafHeap:
    heap = LeafHeap()
    heap._CHECK_EVERY = 3  # compact often (the limit is set low again before every operation)
    heap._until_check = 3
    return heap


def apply_ops(ops: list, monkeypatch) -> tuple[list, int]:
    """The operations on two heaps, the switch on for one and off for the other; the pops of each, and how many
    entries the skipping heap left out (its pushes fewer than the other's)."""
    root = Node(seq(("root", 0)), 0, None, [], None)  # type: ignore[arg-type]
    nodes = [Node(seq((f"n{i}", 1)), 0, root, [i], None) for i in range(NUM_NODES)]
    heaps, pops, pushed = {True: _heap(), False: _heap()}, {True: [], False: []}, {True: 0, False: 0}
    clock = 0
    for op in ops:
        kind, node = op[0], nodes[op[1]]
        if kind == "restamp":
            clock += 1
            node.full_stamp = clock
        elif kind in ("child", "lock", "kill"):
            if kind == "child":
                node.children = {("c",): root} if op[2] else {}
            elif kind == "lock":
                node.full_lock = int(op[2])
            else:
                node.alive = node.alive and not op[2]
            if kind == "kill" or op[2]:
                continue
            kind = "release"  # the heap's contract: what may make a node a candidate again pushes it anew
        popped = None
        for skip, heap in heaps.items():
            monkeypatch.setattr(freetoken_tree, "SKIP_QUEUED", skip)
            heap._limit = dict.fromkeys(Component, 2)
            before = len(heap.heaps[FULL])
            if kind in ("push", "restamp"):
                heap.push(FULL, node, node.full_stamp)
            elif kind == "release":
                heap.release(node)
            else:
                popped = heap.pop(FULL, _unlocked_leaf)
                pops[skip].append(popped and popped.id)
            pushed[skip] += max(len(heap.heaps[FULL]) - before, 0)
        if popped is not None:  # evicted, as ``evict_full`` does with what it pops
            popped.alive = False
    assert pops[True] == pops[False]
    return pops[True], pushed[False] - pushed[True]


@pytest.mark.interpreted  # sets the module's switch, which the compiled core binds
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=FIXED_OPS)
@example(ops=COMPACTED_OPS)
def test_two_heaps_pop_the_same_nodes(ops, monkeypatch):
    apply_ops(ops, monkeypatch)


@pytest.mark.interpreted
def test_the_fixed_operations_skip_pushes_and_pop(monkeypatch):
    """A test of the fixed operations: pushes are skipped and pops return nodes (floors)."""
    pops, num_skipped = apply_ops(FIXED_OPS, monkeypatch)
    assert num_skipped >= 3 and sum(p is not None for p in pops) >= 3


def run_logged(trace, config, skip: bool, monkeypatch) -> tuple[list, object, int]:
    """The run (real ids), the switch set to ``skip``: every FULL eviction's log, and the entries pushed."""
    log: list = []
    num_pushed = [0]
    lru_push = LRUEviction.push

    def counted_push(heap, comp, node, stamp):
        num_pushed[0] += 1
        lru_push(heap, comp, node, stamp)

    monkeypatch.setattr(freetoken_tree, "SKIP_QUEUED", skip)
    monkeypatch.setattr(LRUEviction, "push", counted_push)
    monkeypatch.setattr(common, "evict_full", logged(evict_full, log))
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: their stack is compared
    result = simulate(trace, config)
    return log, result, num_pushed[0]


def assert_same_evictions(trace, config, monkeypatch) -> tuple[list, int]:
    """The two runs equal; returns the skipping run's log and the pushes it skipped."""
    (skip_log, _, skip_pushed), (_, _, all_pushed) = same_both_ways(
        lambda skip: run_logged(trace, config, skip, monkeypatch)
    )
    return skip_log, all_pushed - skip_pushed


@pytest.mark.interpreted  # patches module flags and LRUEviction.push, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_freetokens_evictions_are_the_same_with_skipped_pushes(case, monkeypatch):
    trace, config = case
    assert_same_evictions(trace, config, monkeypatch)  # a configuration FreeToken refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_a_fixed_run_skips_pushes_and_evicts(mode, monkeypatch):
    """A fixed run evicts and skips pushes (a run that never did would pass anything)."""
    trace = multiturn(
        num_sessions=4, num_turns=4, system_len=300, user_len=100, output_len=100, think_time=0.2,
        request_rate=4.0, seed=3,
    )  # fmt: skip
    config = SimConfig(
        policy="freetoken-budget", model="inkling", knobs=dict(page_size=1), pool_tokens=1_500, mode=mode,
        bounds=False,
    )  # fmt: skip
    log, num_skipped = assert_same_evictions(trace, config, monkeypatch)
    assert sum(freed for _, freed, _, _ in log) >= 500 and num_skipped >= 20
