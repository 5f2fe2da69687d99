"""FreeToken's inserts and finish trims free their per-node lists together, one list per pool and operation
(``freetoken_frees.PoolFrees``), joined last-freed first: as a property over the generated FreeToken runs of
``test_freetoken_leaf_heap`` (page sizes 1, 2, 16; SWA, SWA + GDN and GDN models; the three presets; small
pools; replay and timed), every id every pool hands out, in order, and the free ids left at the end are those
of the reference, where each list is freed at once (``BATCHED = False``), and so are the run's tables.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_frees as frees
from sim.cache.components import FULL, SWA
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

POOL_ALLOC, TREE_INIT = Pool.alloc, RadixTree.__init__  # before any patch (a test runs twice)
# a run whose operations free several lists at once, which the generated cases may never reach: the property's
# example, so the joins' order is held to the reference (``test_the_batches_join_several_lists``)
JOINING_CASE = (
    multiturn(
        num_sessions=4,
        num_turns=3,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
    ),
    SimConfig(policy="freetoken", model="inkling", knobs=dict(page_size=1), pool_tokens=2_000, bounds=False),
)


def run_logged(trace, config, batched: bool, monkeypatch) -> tuple[list, object]:
    """The run, and every allocation's ids and every tree's pools' free ids at its end, in order."""
    log: list = []
    alloc, init = POOL_ALLOC, TREE_INIT

    def logged_alloc(pool, count):
        ids = alloc(pool, count)
        log.append((pool.name, list(ids)))
        return ids

    def kept_init(tree, *args, **kwargs):
        init(tree, *args, **kwargs)
        trees.append(tree)

    trees: list = []
    monkeypatch.setattr(frees, "BATCHED", batched)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(RadixTree, "__init__", kept_init)
    result = simulate(trace, config)
    for tree in trees:
        log.append([tree.full_pool.returned_ids(), tree.swa_pool.returned_ids()])
    return log, result


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
@example(case=JOINING_CASE)
def test_batched_frees_leave_the_pools_as_one_by_one(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda batched: run_logged(trace, config, batched, monkeypatch))


@pytest.mark.interpreted
def test_the_batches_join_several_lists(monkeypatch):
    """A test of the generator: the runs do free several lists in one operation, and hand freed ids out again
    (a batch of one list, or ids never reused, would pass anything)."""
    joined: list[int] = []
    free_as_one = frees._free_as_one

    def counted(pool, parts):
        joined.append(len(parts))
        free_as_one(pool, parts)

    monkeypatch.setattr(frees, "_free_as_one", counted)
    trace, config = JOINING_CASE
    log, _ = run_logged(trace, config, True, monkeypatch)
    assert max(joined) > 2
    reused = [
        ids for name, ids in log[:-1] if name in (FULL.pool_name, SWA.pool_name) and ids and min(ids) < 500
    ]
    assert len(reused) > 10
