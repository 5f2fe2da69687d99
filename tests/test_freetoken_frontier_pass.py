"""FreeToken's insert passes over the walked nodes from the request's SWA frontier
(``freetoken_insert.PASS_FROM_FRONTIER``): the FULL copies joined straight from the nodes, the SWA pass skipping
the nodes below the frontier whose request copy is already freed. As a property over the generated FreeToken
runs (``test_freetoken_page_lists.page_cases``: SWA, SWA + GDN and GDN models, the three presets, short windows,
pages 1, 2, 16 and 64, bounds on and off, replay and timed, small pools): every id every pool hands out, in
order, every tree's nodes as the run ends (span, FULL and SWA pages, stamp), the pools' free ids and the run's
tables equal the reference's, the inline loop over every walked node.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from real_id_runs import assert_switch_equal
from test_freetoken_page_lists import page_cases

import sim.cache.engines.freetoken_insert as insert
from sim.run.simulate import SimConfig
from sim.trace.generate import multiturn


def assert_frontier_pass_equal(trace, config, monkeypatch) -> None:
    assert_switch_equal(trace, config, insert, "PASS_FROM_FRONTIER", monkeypatch)


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases())
def test_the_frontier_pass_equals_the_pass_over_every_node(case, monkeypatch):
    trace, config = case
    assert_frontier_pass_equal(trace, config, monkeypatch)  # a configuration FreeToken refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("policy, num_turns, num_states", [("freetoken", 6, 16), ("freetoken-budget", 8, 8)])
def test_inserts_walk_nodes_on_both_sides_of_the_frontier(policy, num_turns, num_states, monkeypatch):
    """A test of the generator: inserts do walk several nodes below the frontier (the ones skipped) and nodes
    past it (the ones revived); and one fixed case of it, held to the reference."""
    below: list[int] = []
    past: list[int] = []
    reconcile = insert._reconcile_from_frontier

    def counted(tree, frontier, path, *args):
        below.append(sum(node.end <= frontier for node in path))
        past.append(sum(node.end > frontier and node.swa_pages is None for node in path))
        reconcile(tree, frontier, path, *args)

    monkeypatch.setattr(insert, "_reconcile_from_frontier", counted)
    trace = multiturn(
        num_sessions=4,
        num_turns=num_turns,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=1,
    )
    page = 16  # (at page 1 these runs' inserts walk a node or two below the frontier)
    config = SimConfig(  # few states: turns lose their last one and recompute their trimmed path
        policy=policy,
        model="inkling",
        knobs=dict(page_size=page, chunked_prefill_size=page * 16, window=32),
        pool_tokens=4_000 // page * page,
        mamba_states=num_states,
        bounds=False,
    )
    assert_frontier_pass_equal(trace, config, monkeypatch)
    assert sum(num_below > 2 for num_below in below) >= 4
    assert max(past) >= 1
