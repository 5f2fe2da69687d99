"""A GDN snapshot's commit with its relock and its re-match's stamps in one climb, and a finish whose release
leaves the path's locks to the trim's re-match (``freetoken_relock``), equal the references (``relock`` then
``rematch``'s ``stamp_path``; ``unlock`` then ``stamp_path``; ``FUSE_RELOCK_STAMP`` / ``FUSE_UNLOCK_STAMP`` off):
``lock_and_stamp`` and ``unlock_and_stamp`` against the two climbs on generated paths (pinned: the match below,
at and above the locks, none), and whole generated FreeToken runs switched on and off
(``test_freetoken_leaf_heap.cases``): after every commit and every finish trim, the path's locks and stamps, the
tree's unlocked count, the clock, the leaf heap (and a commit's window), and the run's tables.
"""

from __future__ import annotations

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_relock as relock
from sim.cache.components import FULL
from sim.cache.engines.freetoken_gdn import SwaGdnRules
from sim.cache.engines.freetoken_swa import SwaRules
from sim.cache.engines.freetoken_tree import FreeTokenClock
from sim.cache.locks import _lock_path
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

# before any patch
COMMIT_STATE, AFTER_RELEASE = SwaGdnRules.commit_state, SwaRules.after_release
LOCK_AND_STAMP, UNLOCK_AND_STAMP = relock.lock_and_stamp, relock.unlock_and_stamp


def chain(tree: RadixTree, sizes_and_locks) -> list[Node]:
    """A path below ``tree``'s root, top first: (tokens, FULL holders) a node."""
    path, parent, start = [], tree.root, 0
    for num, num_holders in sizes_and_locks:
        node = Node(seq(("x", num)), start, parent, [0] * num, None)
        node.full_lock = num_holders
        parent.children[(start,)] = node
        path.append(node)
        parent, start = node, node.end
    return path


def after(tree: RadixTree, path: list[Node]) -> tuple:
    return [(n.full_lock, n.full_stamp) for n in path], tree.num_unlocked_tokens


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=20),
    stop_at=st.integers(-1, 19),
    best_at=st.integers(-1, 19),
)
@example(specs=[(2, 1), (1, 0), (3, 0), (1, 0)], stop_at=0, best_at=2)  # the match below the old lock
@example(specs=[(2, 1), (1, 1), (3, 0), (1, 0)], stop_at=1, best_at=1)  # at it
@example(specs=[(2, 0), (1, 1), (3, 0), (1, 0)], stop_at=2, best_at=0)  # above it
@example(specs=[(2, 0), (1, 0), (3, 0)], stop_at=-1, best_at=2)  # at the node, the lock from the root
@example(specs=[(2, 0), (1, 0)], stop_at=-1, best_at=-1)  # no match: the root
def test_lock_and_stamp_equals_the_two_climbs(specs, stop_at, best_at):
    """Index -1: the root; an index past the path: its last node."""

    def pick(path, tree, at):
        return tree.root if at < 0 else path[min(at, len(path) - 1)]

    logs = []
    for fused in (True, False):
        tree = RadixTree(1, Pool("full", 100), Pool("swa", 0), Pool("state", 0))
        path = chain(tree, specs)
        stop, best = pick(path, tree, stop_at), pick(path, tree, best_at)
        if fused:
            relock.lock_and_stamp(tree, path[-1], stop, best, 1000)
        else:
            _lock_path(tree, path[-1], stop)
            FreeTokenClock().stamp_from(best, 1000, 0)
        logs.append(after(tree, path))
    assert logs[0] == logs[1]


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=20),
    node_at=st.integers(-1, 19),
    best_at=st.integers(-1, 19),
)
@example(specs=[(2, 1), (1, 2), (3, 1), (1, 1)], node_at=2, best_at=3)  # the match below the locks left
@example(specs=[(2, 1), (1, 2), (3, 1), (1, 1)], node_at=3, best_at=1)  # above them
@example(specs=[(2, 2), (1, 1), (3, 1)], node_at=1, best_at=1)  # at their first node
@example(specs=[(2, 1), (1, 1)], node_at=1, best_at=-1)  # no match: the root
@example(specs=[(2, 1), (1, 1)], node_at=-1, best_at=0)  # nothing left (the root)
def test_unlock_and_stamp_equals_the_two_climbs(specs, node_at, best_at):
    """Index -1: the root; an index past the path: its last node. Every node holds at least one lock."""
    logs = []
    for fused in (True, False):
        tree = RadixTree(1, Pool("full", 100), Pool("swa", 0), Pool("state", 0))
        path = chain(tree, specs)
        node = tree.root if node_at < 0 else path[min(node_at, len(path) - 1)]
        best = tree.root if best_at < 0 else path[min(best_at, len(path) - 1)]
        if fused:
            relock.unlock_and_stamp(tree, node, best, 1000)
        else:
            relock.unlock_path(tree, node)
            FreeTokenClock().stamp_from(best, 1000, 0)
        logs.append(after(tree, path))
    assert logs[0] == logs[1]


def run_logged(trace, config, on: bool, monkeypatch) -> tuple[list, object]:
    """The run with ``FUSE_RELOCK_STAMP`` ``on``; after every commit, what the relock and the stamps write."""
    log: list = []

    def logged_commit(self, manager, req, end):
        taken = COMMIT_STATE(self, manager, req, end)
        tree, held = manager.tree, req.locks
        path = [(n.start, n.end, n.full_lock, n.full_stamp) for n in held.node.path_from_root()]
        heap = [
            (stamp, n.start, n.end) for stamp, _, n in self.clock.leaves.heaps[FULL]
        ]  # ids: a global count
        window = ([(n.start, n.end) for n in held.swa_nodes], held.swa_covered, held.state_node is not None)
        log.append((end, taken, path, tree.num_unlocked_tokens, self.clock.events, heap, window))
        return taken

    def logged_release(self, manager, req):
        AFTER_RELEASE(self, manager, req)
        path = [(n.start, n.end, n.full_lock, n.full_stamp) for n in req.locks.node.path_from_root()]
        heap = [(stamp, n.start, n.end) for stamp, _, n in self.clock.leaves.heaps[FULL]]
        log.append(("release", path, manager.tree.num_unlocked_tokens, self.clock.events, heap))

    monkeypatch.setattr(relock, "FUSE_RELOCK_STAMP", on)
    monkeypatch.setattr(relock, "FUSE_UNLOCK_STAMP", on)
    monkeypatch.setattr(SwaGdnRules, "commit_state", logged_commit)
    monkeypatch.setattr(SwaRules, "after_release", logged_release)
    return log, simulate(trace, config)


@pytest.mark.interpreted  # patches a module flag and SwaGdnRules.commit_state, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_fused_commit_equals_the_two_passes_over_runs(case, monkeypatch):
    trace, config = case
    try:
        on_log, on = run_logged(trace, config, True, monkeypatch)
    except ValueError:  # a configuration FreeToken refuses (e.g. the scan chunk and the page)
        reject()
    off_log, off = run_logged(trace, config, False, monkeypatch)
    assert on_log == off_log
    assert on.requests.equals(off.requests)
    assert on.steps.equals(off.steps)
    assert on.summary == off.summary


@pytest.mark.interpreted
def test_a_fixed_run_fuses_long_climbs(monkeypatch):
    """A test of the run test: commits that take the one climb over many nodes (a run whose commits all take
    the reference would pass anything), held to the reference."""
    trace = multiturn(
        num_sessions=4,
        num_turns=6,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=1,
    )
    config = SimConfig(
        policy="freetoken-budget",
        model="inkling",
        knobs=dict(page_size=1, window=32),
        pool_tokens=4_000,
        mamba_states=16,
        bounds=False,
    )
    climbs: list[int] = []
    lifts: list[int] = []

    def counted(tree, node, stop, best, stamp):
        climbs.append(len(node.path_from_root()))
        LOCK_AND_STAMP(tree, node, stop, best, stamp)

    def counted_lift(tree, node, best, stamp):
        lifts.append(len(node.path_from_root()))
        UNLOCK_AND_STAMP(tree, node, best, stamp)

    monkeypatch.setattr(relock, "lock_and_stamp", counted)
    monkeypatch.setattr(relock, "unlock_and_stamp", counted_lift)
    monkeypatch.setattr("sim.cache.engines.freetoken_swa.unlock_and_stamp", counted_lift)
    log, _ = run_logged(trace, config, True, monkeypatch)
    assert len(climbs) > 10 and max(climbs) > 8
    assert len(lifts) > 10 and max(lifts) > 8
    assert log == run_logged(trace, config, False, monkeypatch)[0]
