"""The why watcher's folded links kept on the nodes (``misses.LINKS_ON_NODES``: ``Node.why_link``, no table)
against the reference, the same links in ``_prefix_links``.

Whole runs (FreeToken, Marconi, the fan-out) come out equal, with equal ``misses`` and ``evicted_pages``, and
the live nodes' links equal the table's, node for node by place. vLLM+'s chunk run (its victims told at once,
``misses_run.tell_evicted``) is run request by request beside a manager on the table and compared after each.
Fixed cases hold floors: entries made, lookups that found an evicted prefix (``next_page_evicted``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_decode_fast_path_property import snapshot
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_marconi_vllm_chunks_property import tight_vllm_caches
from test_marconi_vllm_watcher_property import Watched, links_of
from test_misses_folded_links_property import FLOORED
from test_misses_hashed_property import WATCHER_INIT
from test_page_chunks_property import workloads

import sim.cache.misses as misses
from sim.cache.tree import RadixTree
from sim.run.simulate import simulate

DISMANTLE = RadixTree.dismantle


def watched_run(trace, config, monkeypatch, on_nodes: bool):
    """The run and its miss watchers, each with its live nodes' links by place as the run ends (before its tree
    is dismantled), links kept on nodes or not."""
    watchers: list = []
    links_at_end: dict = {}

    def kept(watcher):
        WATCHER_INIT(watcher)
        watchers.append(watcher)

    def dismantle(tree):
        for watcher in watchers:
            if watcher.tree is tree:
                links_at_end[id(watcher)] = live_links(watcher, tree)
        DISMANTLE(tree)

    with monkeypatch.context() as patch:
        patch.setattr(misses, "FOLD_ON_LINKS", True)
        patch.setattr(misses, "LINKS_ON_NODES", on_nodes)
        patch.setattr(misses.TreeMissTracker, "__post_init__", kept)
        patch.setattr(RadixTree, "dismantle", dismantle)
        run = simulate(trace, config)
    return run, [(watcher, links_at_end.get(id(watcher))) for watcher in watchers]


def live_links(watcher, tree) -> list:
    """The links of the tree's live nodes, by place: the watcher's table's, or those on the nodes."""
    links = links_of(watcher, tree)
    return sorted(((node.start, node.end), links[node]) for node in tree.nodes() if node in links)


def assert_on_nodes_as_reference(trace, config, monkeypatch) -> Counter:
    """The run with links on nodes equals the reference; returns what it reached."""
    on_nodes, watchers = watched_run(trace, config, monkeypatch, True)
    reference, reference_watchers = watched_run(trace, config, monkeypatch, False)
    assert_same_run(on_nodes, reference)
    seen: Counter = Counter()
    for (watcher, links), (plain, plain_links) in zip(watchers, reference_watchers, strict=True):
        assert list(watcher.misses.items()) == list(plain.misses.items())
        assert watcher.evicted_pages == plain.evicted_pages
        assert links == plain_links and not watcher._prefix_links
        seen["links"] += len(links or ())
        seen["entries"] += sum(len(v) if type(v) is list else 1 for v in watcher.evicted_pages.values())
        seen["evicted_hits"] += sum(miss.next_page_evicted for miss in watcher.misses.values())
    return seen


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@pytest.mark.parametrize("index", range(len(FLOORED)))
def test_the_fixed_runs_keep_links_on_nodes_as_the_table(index, monkeypatch):
    trace, config, (entries, evicted_hits) = FLOORED[index]
    seen = assert_on_nodes_as_reference(trace, config, monkeypatch)
    assert seen["entries"] >= entries and seen["evicted_hits"] >= evicted_hits, seen


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
@example(case=FIXED_CASES[2][:2], mode="replay")
@example(case=FIXED_CASES[3][:2], mode="timed")
def test_freetokens_links_on_nodes_equal_the_table(case, mode, monkeypatch):
    trace, config = case
    try:
        assert_on_nodes_as_reference(trace, replace(config, mode=mode), monkeypatch)
    except ValueError:  # a configuration FreeToken refuses (e.g. the scan chunk and the page)
        reject()


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[2][:2])
def test_marconis_links_on_nodes_equal_the_table(case, monkeypatch):
    trace, config = case
    assert_on_nodes_as_reference(trace, config, monkeypatch)


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cache=tight_vllm_caches(), requests=workloads())
def test_vllms_chunk_run_tells_links_on_nodes_as_the_table(cache, requests, monkeypatch):
    """Two managers, one request at a time each under its switch: equal trees and tables after each."""
    monkeypatch.setattr(misses, "FOLD_ON_LINKS", True)
    sides = [(True, Watched(*cache, True, True)), (False, Watched(*cache, True, True))]
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        answers = []
        for on_nodes, side in sides:
            monkeypatch.setattr(misses, "LINKS_ON_NODES", on_nodes)
            answers.append(side.run(rid, tokens, shared_len + own_len, output_len))
        (_, on_nodes_side), (_, table_side) = sides
        assert answers[0] == answers[1]
        assert snapshot(on_nodes_side.manager) == snapshot(table_side.manager), f"after {rid}"
        assert on_nodes_side.tables() == table_side.tables(), f"after {rid}"
        assert not on_nodes_side.watcher._prefix_links
