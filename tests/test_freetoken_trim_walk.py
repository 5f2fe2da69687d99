"""FreeToken's finish trim (``trim_head``) makes its ``match_prefix`` on the walk it then trims down, instead of
walking the path a second time: as a property over the generated FreeToken runs of ``test_freetoken_leaf_heap``
(models, page sizes, presets, small pools, replay and timed), every node the trim tombstones, in order, and the
run's tables are those of the reference (``TRIM_REUSES_WALK = False``: ``match_prefix``, then a second walk).
The ``@example``: the generated case that found a walk cutting a run node missing the run's pieces above the cut
(its tree alone: test_walk_run_pieces.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_swa as swa
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

TOMBSTONE = RadixTree.tombstone  # before any patch (a test runs twice)
# s1-t2's trim (keep_from 104) cuts the run [0, 360) (cuts 100, 110) inside its second piece: the walk listed
# only [100, 104), so the fast trim left [0, 100) live; FreeToken's second walk from the root tombstones it
RUN_CUT_INSIDE = (
    multiturn(
        num_sessions=2,
        num_turns=3,
        system_len=100,
        user_len=10,
        output_len=251,
        think_time=0.2,
        request_rate=4.0,
        seed=0,
    ),
    SimConfig(
        policy="freetoken",
        model="inkling",
        knobs=dict(page_size=2, chunked_prefill_size=16, max_running_requests=1),
        pool_tokens=1104,
        mamba_states=64,
        mode="replay",
        bounds=False,
    ),
)


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
@example(case=RUN_CUT_INSIDE)
def test_trim_on_its_match_walk_equals_a_second_walk(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda reuses_walk: run_logged(trace, config, reuses_walk, monkeypatch))
