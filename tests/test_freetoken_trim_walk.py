"""FreeToken's finish trim (``trim_head``) makes its ``match_prefix`` on the walk it then trims down, instead of
walking the path a second time: as a property over the generated FreeToken runs of ``test_freetoken_leaf_heap``
(models, page sizes, presets, small pools, replay and timed), every node the trim tombstones, in order, and the
run's tables are those of the reference (``TRIM_REUSES_WALK = False``: ``match_prefix``, then a second walk).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_swa as swa
from sim.cache.tree import RadixTree
from sim.run.simulate import simulate

TOMBSTONE = RadixTree.tombstone  # before any patch (a test runs twice)


def run_logged(trace, config, reuses_walk: bool, monkeypatch) -> tuple[list, object]:
    """The run, and every tombstone made (the node's span and the pages freed), in order."""
    log: list = []

    def logged_tombstone(tree, node, held=None):
        log.append((node.start, node.end, node.swa_pages and list(node.swa_pages)))
        return TOMBSTONE(tree, node, held)

    monkeypatch.setattr(swa, "TRIM_REUSES_WALK", reuses_walk)
    monkeypatch.setattr(
        swa, "TRIM_AS_RUN", False
    )  # the per-node trim (test_freetoken_path_runs holds the run)
    monkeypatch.setattr(RadixTree, "tombstone", logged_tombstone)
    return log, simulate(trace, config)


@pytest.mark.interpreted  # patches a module flag and RadixTree.tombstone, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_trim_on_its_match_walk_equals_a_second_walk(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda reuses_walk: run_logged(trace, config, reuses_walk, monkeypatch))
