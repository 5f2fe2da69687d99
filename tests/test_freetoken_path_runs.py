"""FreeToken's per-path passes done as runs: the insert's SWA pass over the walked nodes inline
(``freetoken_insert.INLINE_RECONCILE``), the finish trim's tombstones as one ``tombstone_run`` and the prompt's
re-match walking on from the trim's walk (``freetoken_swa.TRIM_AS_RUN``). As a property over the generated
FreeToken runs of ``test_freetoken_leaf_heap`` (page sizes 1, 2, 16; SWA, SWA + GDN and GDN models; the three
presets; small pools; replay and timed): every id every pool hands out, in order, every tree's nodes at the end
(span, SWA pages, stamp) and every node's tombstone cause the why watcher recorded, and the run's tables (the
why column included) are those of the reference, where both flags are off.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_leaf_heap import cases

import sim.cache.engines.freetoken_insert as insert
import sim.cache.engines.freetoken_swa as swa
from sim.cache.misses import TreeMissTracker
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

POOL_ALLOC, DISMANTLE, WATCHER_INIT = Pool.alloc, RadixTree.dismantle, TreeMissTracker.__post_init__


@st.composite
def short_window_cases(draw):
    """``cases`` with short windows and few states, so that prompts trim and later prompts revive what a trim
    left (a long window keeps the generated prompts' heads live; a turn that keeps its state never recomputes)."""
    trace, config = draw(cases())
    window = draw(st.sampled_from([None, 16, 32, 64, 128]))
    config = replace(config, mamba_states=draw(st.sampled_from([12, 16, 24, 64])))
    if window is None or config.model == "qwen3-next":  # qwen3-next: no SWA
        return trace, config
    page = config.knobs["page_size"]
    return trace, replace(config, knobs={**config.knobs, "window": max(window // page, 1) * page})


def run_logged(trace, config, as_runs: bool, monkeypatch) -> tuple[list, object]:
    """The run, every allocation's ids, and every tree's nodes and their tombstone causes as the run ends."""
    log: list = []
    watchers: list = []

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        log.append((pool.name, list(ids)))
        return ids

    def kept_watcher(watcher):
        WATCHER_INIT(watcher)
        watchers.append(watcher)

    def logged_dismantle(tree):  # the run throws its tree away at its end: its nodes are logged first
        causes = {node: cause for w in watchers for node, cause in w.tomb_cause.items()}
        nodes = sorted(tree.nodes(), key=lambda n: (n.start, n.end, n.full_stamp))
        # the two runs' nodes are different objects: each node's cause is compared, by its place
        log.append([(n.start, n.end, n.swa_pages, n.full_stamp, causes.get(n)) for n in nodes])
        log.append((tree.num_swa_pages, tree.full_pool.returned_ids(), tree.swa_pool.returned_ids()))
        DISMANTLE(tree)

    monkeypatch.setattr(insert, "PASS_FROM_FRONTIER", False)  # the inline loop (test_freetoken_frontier_pass)
    monkeypatch.setattr(insert, "INLINE_RECONCILE", as_runs)
    monkeypatch.setattr(swa, "TRIM_AS_RUN", as_runs)
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(RadixTree, "dismantle", logged_dismantle)
    monkeypatch.setattr(TreeMissTracker, "__post_init__", kept_watcher)
    result = simulate(trace, config)
    return log, result


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=short_window_cases())
def test_path_runs_equal_the_per_node_steps(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda as_runs: run_logged(trace, config, as_runs, monkeypatch))


@pytest.mark.interpreted
def test_the_runs_revive_and_trim_several_nodes(monkeypatch):
    """A test of the generator: the runs do revive nodes inline and trim several nodes at once (a run of one
    node, or none, would pass anything); and one fixed case of it, held to the reference."""
    trimmed: list[int] = []
    revived: list[int] = []
    tombstone_doomed, reconcile = swa.tombstone_doomed, insert._reconcile_swa

    def counted(tree, nodes, frees):
        trimmed.append(len(nodes))
        tombstone_doomed(tree, nodes, frees)

    def counted_revives(tree, frontier, path, *args):
        dead = [node for node in path if node.swa_pages is None]
        reconcile(tree, frontier, path, *args)
        revived.append(sum(node.swa_pages is not None for node in dead))

    monkeypatch.setattr(swa, "tombstone_doomed", counted)
    monkeypatch.setattr(insert, "_reconcile_swa", counted_revives)
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
    config = SimConfig(  # few states: turns lose their last one and recompute their trimmed path
        policy="freetoken",
        model="inkling",
        knobs=dict(page_size=1, window=32),
        pool_tokens=4_000,
        mamba_states=16,
        bounds=False,
    )
    log, _ = run_logged(trace, config, True, monkeypatch)
    assert len(log[-2]) > 10  # the tree's nodes, as the run ended
    assert max(trimmed) > 2
    assert max(revived) > 2
    # and there the runs equal the reference: this case also meets re-matches shallower than the trim's
    # match (no state in the prompt's live tail), whose deeper stamps the trim's match makes afterwards
    assert log == run_logged(trace, config, False, monkeypatch)[0]
