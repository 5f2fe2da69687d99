"""FreeToken's run nodes (``tree_runs``) against the per-node tree: with ``RUN_NODES`` on and off, one generated
run each way (``test_freetoken_leaf_heap``'s and ``test_freetoken_scans``' generated runs: page sizes, SWA / SWA +
GDN / GDN models, the three FreeToken presets, small pools, SWA short, replay and timed; anonymous ids: runs are made only where the pools count their frees) must give the same tables and, after every finish, the same tree once each run node is
read as its pieces (span, tokens, pages, stamp, locks, holders, state, children). A fixed run's floors: runs
joined, and a piece made a node again by each reader that reads inside a run (a walk's end, the window lock,
the SWA scan, the eviction cascade, the revive's frontier).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from test_freetoken_leaf_heap import cases
from test_freetoken_scans import cases as cases_under_pressure

import sim.cache.tree_runs as tree_runs
from sim.cache.engines.freetoken_swa import SwaRules
from sim.cache.node import Node
from sim.cache.tree_runs import surface
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn


def pieces(tree) -> list[tuple]:
    """Every node of the per-node tree the run tree stands for, as a tuple of what a rule may read."""
    out = []
    stack = list(tree.root.children.values())
    while stack:
        node: Node = stack.pop()
        stack.extend(node.children.values())
        bounds = [node.start, *(node.cuts or []), node.end]
        num_cuts, page = len(bounds) - 2, tree.page_size
        for i in range(num_cuts + 1):
            lo, hi = (bounds[i] - node.start) // page, (bounds[i + 1] - node.start) // page
            last = i == num_cuts
            out.append(
                (
                    bounds[i],
                    bounds[i + 1],
                    node.key.slice(bounds[i] - node.start, bounds[i + 1] - node.start).runs,
                    tuple(node.full_pages[lo:hi]),
                    None if node.swa_pages is None else tuple(node.swa_pages[lo:hi]),
                    node.full_stamp - (num_cuts - i) * node.stamp_step,
                    node.full_lock,
                    tuple(sorted(node.swa_holders)),
                    node.state if last else None,
                    node.state_lock if last else 0,
                    len(node.children) if last else 1,
                )
            )
    return sorted(out, key=repr)


_AFTER_RELEASE = SwaRules.after_release  # (a second run of one test finds the first one's patch)


def run_logged(trace, config, on: bool, monkeypatch) -> tuple[list, object]:
    log: list = []
    monkeypatch.setattr(tree_runs, "RUN_NODES", on)

    def logged(self, manager, req):
        _AFTER_RELEASE(self, manager, req)
        log.append(pieces(manager.tree))

    monkeypatch.setattr(SwaRules, "after_release", logged)
    return log, simulate(trace, config)


FIXED = (  # SWA short while FULL is not: every reader meets a run
    multiturn(
        num_sessions=6, num_turns=5, system_len=400, user_len=150, output_len=100, think_time=0.2,
        request_rate=4.0, seed=11,
    ),
    SimConfig(
        policy="freetoken-budget", model="inkling",
        knobs=dict(page_size=1, chunked_prefill_size=32, max_running_requests=3),
        pool_tokens=3_000, swa_full_tokens_ratio=0.3, mode="timed", bounds=False,
    ),
)  # fmt: skip
HELD = (  # more requests at once: a walk ends inside a run that a window holds
    multiturn(
        num_sessions=6, num_turns=5, system_len=400, user_len=40, output_len=100, think_time=0.2,
        request_rate=4.0, seed=11,
    ),
    SimConfig(
        policy="freetoken-budget", model="inkling",
        knobs=dict(page_size=1, chunked_prefill_size=32, max_running_requests=6),
        pool_tokens=3_000, swa_full_tokens_ratio=0.3, mode="timed", bounds=False,
    ),
)  # fmt: skip


@pytest.mark.interpreted  # patches SwaRules.after_release, which the compiled core calls directly
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.one_of(cases(), cases_under_pressure()))
@example(case=FIXED)
@example(case=HELD)
def test_run_nodes_read_as_the_per_node_tree(case, monkeypatch):
    trace, config = case
    try:
        runs_log, runs = run_logged(trace, config, True, monkeypatch)
    except ValueError:  # a configuration FreeToken refuses
        reject()
    nodes_log, nodes = run_logged(trace, config, False, monkeypatch)
    assert runs_log == nodes_log
    assert runs.requests.equals(nodes.requests)
    assert runs.summary == nodes.summary


@pytest.mark.interpreted  # counts calls the compiled core makes directly
def test_a_held_run_is_surfaced(monkeypatch):
    """The floor of ``HELD``: a run that a window holds is made two nodes (both held, both in the lock sets)."""
    held = []

    def counted(tree, node, pos):
        held.append(bool(node.swa_holders))
        return surface(tree, node, pos)

    for module in ("sim.cache.tree_runs", "sim.cache.locks", "sim.cache.engines.freetoken_tree"):
        monkeypatch.setattr(module + ".surface", counted)
    simulate(*HELD)
    assert sum(held) >= 3


@pytest.mark.interpreted  # counts calls the compiled core makes directly
def test_the_fixed_run_joins_and_surfaces(monkeypatch):
    """The floors: runs are made, and each reader that reads inside one meets one."""
    counts: Counter = Counter()

    def counted(name, fn):
        def call(*args):
            counts[name + " <- " + __import__("sys")._getframe(1).f_code.co_name] += 1
            return fn(*args)

        return call

    monkeypatch.setattr(tree_runs, "_join", counted("join", tree_runs._join))
    monkeypatch.setattr(tree_runs, "surface", counted("surface", tree_runs.surface))
    for module in ("sim.cache.locks", "sim.cache.engines.freetoken_tree"):
        monkeypatch.setattr(module + ".surface", counted("surface", tree_runs.surface))
    for module in ("sim.cache.tree", "sim.cache.engines.freetoken_insert"):
        monkeypatch.setattr(module + ".around", counted("around", tree_runs.around))
    monkeypatch.setattr("sim.cache.engines.freetoken_scans.piece_at", counted("piece_at", tree_runs.piece_at))
    simulate(*FIXED)
    print(sorted(counts.items()))
    assert counts["join <- compact"] > 20
    for reader in (
        "around <- split",
        "around <- _reconcile_from_frontier",
        "surface <- _cut_at_window",
        "surface <- delete_with_exposed",
        "piece_at <- _evict_by_scan",
    ):
        assert counts[reader] >= 1, reader
