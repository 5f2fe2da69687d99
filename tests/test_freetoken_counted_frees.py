"""Where a pool only counts its frees (``Pool.counts_frees``: the anonymous pools of a run nobody reads an id
of, unwatched), FreeToken's inserts and finish trims (``freetoken_frees.COUNT_ANONYMOUS``) and every engine's
out-of-window SWA free (``request.COUNT_ANONYMOUS_FREES``) count what they free instead of listing it. As a
property over the generated FreeToken runs (``test_freetoken_page_lists.page_cases``: SWA, SWA + GDN and GDN
models, the three presets, short windows, pages 1, 2, 16 and 64, bounds on and off, small pools; replay and
timed) and Marconi's (``test_marconi_anonymous_ids.marconi_cases``), on anonymous pools: every allocation with
its pool's free count before it, every tree's nodes, free counts and eviction counts as the run ends, and the
run's tables and summary equal the reference's, where every free is listed (both switches off). Fixed cases
(the ``@example``s) hold floors on the counted path's use, in the test's own run: it counts ids by the
thousand, evicts and leaves tombstones.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from anonymous_runs import run_switched
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases

import sim.cache.engines.freetoken_frees as frees
import sim.cache.request as request_module
import sim.cache.tree_runs as tree_runs
from sim.cache.components import Component
from sim.cache.pools import Pool

POOL_FREE_COUNT = Pool.free_count


@pytest.fixture(autouse=True)
def per_node_tree(monkeypatch):
    """The listed frees make no run nodes (their order is a node's), so the counted side makes none either here:
    tests/test_run_nodes_property.py holds the runs to the per-node tree."""
    monkeypatch.setattr(tree_runs, "RUN_NODES", False)


def run_logged(trace, config, counted: bool, monkeypatch) -> tuple[list, object, dict]:
    """``anonymous_runs.run_switched`` with the switches set to ``counted`` (page lists logged by length); the
    ids counted (``Pool.free_count``), per pool."""
    num_counted = {Component.FULL: 0, Component.SWA: 0}

    def tallied_free_count(pool, count):
        num_counted[pool.component] += count
        POOL_FREE_COUNT(pool, count)

    switches = {
        (frees, "COUNT_ANONYMOUS"): counted,
        (request_module, "COUNT_ANONYMOUS_FREES"): counted,
        (Pool, "free_count"): tallied_free_count,
    }
    log, result = run_switched(trace, config, switches, monkeypatch, lists=False)
    return log, result, num_counted


def assert_counted_run_equal(trace, config, monkeypatch) -> tuple[list, dict]:
    """The two runs equal; returns the counted one's log and the ids it counted."""
    (counted_log, _, num_counted), (_, _, num_listed_counted) = same_both_ways(
        lambda counted: run_logged(trace, config, counted, monkeypatch)
    )
    assert not any(num_listed_counted.values())  # the reference lists every free
    return counted_log, num_counted


@pytest.mark.interpreted  # patches Pool methods and module flags, which the compiled core binds
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
@example(case=FIXED_CASES[0][:2], mode="replay")
@example(case=FIXED_CASES[1][:2], mode="replay")
@example(case=FIXED_CASES[2][:2], mode="replay")
@example(case=FIXED_CASES[3][:2], mode="replay")
def test_the_counted_frees_leave_the_run_as_the_listed_ones(case, mode, monkeypatch):
    trace, config = case
    assert_counted_run_equal(trace, replace(config, mode=mode), monkeypatch)  # a refused config: rejected


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
@example(case=MARCONI_CASES[3][:2])
def test_marconis_counted_swa_frees_leave_the_run_as_the_listed_ones(case, monkeypatch):
    trace, config = case
    assert_counted_run_equal(trace, config, monkeypatch)  # a configuration the engine refuses: rejected


# per fixed case: FULL and SWA ids counted, FULL evictions, tombstones as the run ends (the last two as in
# test_freetoken_anonymous_replay's floors). ``freetoken-lazy``'s fan-out frees nothing through ``PoolFrees``
# (its inserts walk no cached path, it has no finish trim): it is there for the equality alone; only the
# SWA + GDN case's commits walk cached paths and count FULL frees (``full_path``)
COUNTED_FLOORS = [(0, 1_200, 8, 20), (0, 1_100, 5, 20), (0, 0, 40, 2), (4_000, 300, 8, 4)]


@pytest.mark.interpreted
@pytest.mark.parametrize("case, floors", list(zip([c[:2] for c in FIXED_CASES], COUNTED_FLOORS, strict=True)))
def test_the_fixed_replays_count_their_frees(case, floors, monkeypatch):
    """A test of the fixed examples: their replays count ids by the thousand, evict and leave tombstones (a
    replay that never took the counted path, or never reused a page, would pass anything)."""
    trace, config = case
    log, num_counted = assert_counted_run_equal(trace, replace(config, mode="replay"), monkeypatch)
    min_full, min_swa, min_full_evictions, min_tombstones = floors
    assert num_counted[Component.FULL] >= min_full
    assert num_counted[Component.SWA] >= min_swa
    assert log[-1][2][Component.FULL] >= min_full_evictions
    assert sum(node[4] for node in log[-2]) >= min_tombstones
