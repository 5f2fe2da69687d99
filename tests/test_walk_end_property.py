"""A walk read at its end (``walk_end``) and FreeToken's SWA match and finish trim on it
(``freetoken_swa.WALKS_BY_END``) against the walk's list (``RadixTree.walk``) and the rules on it (the
reference).

The tree: on generated runs of inserts, walks, locks and leaf deletions (``test_walk_hints``'), every walk
from the root is made both ways on two trees built alike, and each answer (the end node, the depth), the trees
(every node's span, stamp, lock and parent) and the hints remembered are compared after every step. The runs:
generated FreeToken runs (``page_cases``: SWA, SWA + GDN and GDN models, the three presets, pages 1 to 64,
replay or timed) with the switch on equal the runs with it off; fixed runs hold floors counted in the test's
own run: walks that end in a split, matches whose acceptable node lies above the walk's end, and finish trims
that tombstone nodes (a run that never reached those would pass a rule that ignores them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_walk_hints import SEQUENCES, _apply, _shape, _tree, operations

import sim.cache.engines.freetoken_swa as swa
from sim.cache.tree import RadixTree
from sim.cache.walk_end import walk_end
from sim.run.simulate import simulate


def _walk_or_end(by_end: bool):
    """A walk for ``_apply``: one from the root, without stamps, made by ``walk_end`` where ``by_end`` (its
    answer as ``[last node]``, which ``_apply`` reads as the walk's list; the other walk gives its last too)."""

    def walk(tree: RadixTree, key, end, start=None, touch=False):
        if start is not None or touch:
            return RadixTree.walk(tree, key, end, start, touch)
        if by_end:
            last, depth = walk_end(tree, key, end)
        else:
            path, depth = RadixTree.walk(tree, key, end)
            last = path[-1] if path else tree.root
        return [last], depth

    return walk


def _hints(tree: RadixTree, keys: list) -> list[tuple]:
    """What the walk hints remember: per head, which sequence (by identity) and the node's span."""
    known = tree.hints._deepest.items()
    return sorted((head, [k is key for k in keys].index(True), n.start, n.end) for head, (key, n) in known)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_a_walk_read_at_its_end_is_the_walks_last_node(ops):
    runs = []
    for by_end in (True, False):
        tree, held = _tree(), {}
        keys = [seq(*parts) for parts in SEQUENCES]
        walk = _walk_or_end(by_end)
        runs.append([(_apply(tree, walk, keys, held, op), _shape(tree), _hints(tree, keys)) for op in ops])
    assert runs[0] == runs[1]


def test_a_walk_end_splits_where_the_walk_splits_and_stops_at_the_root_on_a_miss():
    tree = _tree()
    key = seq(("a", 16))
    leaf = tree.add_leaf(tree.root, key, tree.full_pool.alloc(4), None)
    upper, depth = walk_end(tree, seq(("a", 8), ("b", 8)), 16)
    assert (upper.start, upper.end, depth) == (0, 8, 8) and leaf.parent is upper
    assert walk_end(tree, seq(("c", 8)), 8) == (tree.root, 0)
    assert walk_end(tree, key, 16) == (leaf, 16)


def run_counted(trace, config, real_ids: bool, monkeypatch) -> Counter:
    """The run with the switch on, counting what its walks by the end reached."""
    seen: Counter = Counter()

    def counted_walk_end(tree, key, end):
        num_nodes = sum(1 for _ in tree.nodes())
        last, depth = walk_end(tree, key, end)
        seen["split"] += sum(1 for _ in tree.nodes()) > num_nodes  # a walk adds a node only by a split
        return last, depth

    def counted_match_ending(rules, tree, last, full_depth):
        result = MATCH_ENDING(rules, tree, last, full_depth)
        seen["climbed"] += result.tree_node is not last
        return result

    def counted_doomed(last):
        doomed = DOOMED_ABOVE(last)
        seen["doomed"] += len(doomed)
        seen["runs"] += len(doomed) > 1  # their pages freed as one list, in the trim's order
        path = last.path_from_root()
        seen["held"] += sum(n.swa_pages is not None and bool(n.children and n.swa_holders) for n in path)
        return doomed

    monkeypatch.setattr(swa, "WALKS_BY_END", True)
    monkeypatch.setattr(swa, "walk_end", counted_walk_end)
    monkeypatch.setattr(swa.SwaRules, "match_ending", counted_match_ending)
    monkeypatch.setattr(swa, "doomed_above", counted_doomed)
    seen["result"] = run_logged(trace, config, real_ids, monkeypatch)
    return seen


MATCH_ENDING, DOOMED_ABOVE, DISMANTLE = swa.SwaRules.match_ending, swa.doomed_above, RadixTree.dismantle


def run_logged(trace, config, real_ids: bool, monkeypatch) -> tuple:
    """The run, and each tree's pools' free ids in the order they go out next as the run ends (``real_ids``:
    on real ids, where a replay's pools would be anonymous and only count)."""
    log: list = []

    def logged_dismantle(tree):
        log.append((tree.full_pool.returned_ids(), tree.swa_pool.returned_ids()))
        DISMANTLE(tree)

    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", not real_ids)
    monkeypatch.setattr(RadixTree, "dismantle", logged_dismantle)
    return simulate(trace, config), log


def assert_by_end_equal(trace, config, monkeypatch, real_ids: bool = True) -> Counter:
    seen = run_counted(trace, config, real_ids, monkeypatch)
    by_end, by_end_log = seen.pop("result")
    monkeypatch.setattr(swa, "WALKS_BY_END", False)
    reference, reference_log = run_logged(trace, config, real_ids, monkeypatch)
    assert_same_run(by_end, reference)
    assert by_end_log == reference_log
    return seen


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@pytest.mark.parametrize("index, floors", [(0, (30, 15, 40, 10)), (1, (20, 20, 20, 6)), (3, (4, 15, 0, 0))])
def test_the_fixed_runs_reach_each_branch_and_the_switch_leaves_them_alone(index, floors, monkeypatch):
    """Floors: walks by the end that split, matches climbed above the walk's end, nodes the trims took, and
    trims of several nodes (whose pages go to the pool as one list, in the trim's order: compared on real ids).
    The GDN-with-SWA run at a 128-token window keeps its trims' heads live: it holds the climbs."""
    trace, config = FIXED_CASES[index][:2]
    seen = assert_by_end_equal(trace, replace(config, mode="replay"), monkeypatch)
    reached = (seen["split"], seen["climbed"], seen["doomed"], seen["runs"])
    assert all(count >= floor for count, floor in zip(reached, floors, strict=True)), reached


@pytest.mark.interpreted
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), real_ids=st.booleans())
@example(case=FIXED_CASES[2][:2], real_ids=False)
def test_freetokens_walks_by_the_end_decide_as_the_walks_lists(case, real_ids, monkeypatch):
    trace, config = case
    try:
        assert_by_end_equal(trace, config, monkeypatch, real_ids)
    except ValueError:  # a configuration FreeToken refuses (e.g. the scan chunk and the page)
        reject()
