"""The why watcher's links folded with the last run held as typed locals (``misses_hashing.fold_key_unpacked``,
switch ``UNPACKED_FOLD``) against the reference ``fold_key``: the same pair, link by link, on generated trees of
links whose keys continue the run above them, start a new source, or hold empty runs (which the fold skips);
and whole runs (Marconi, FreeToken, the fan-out) with the switch on and off: equal outputs and equal watcher
tables (``evicted_pages``, the live links).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_misses_chain_hashes_property import LINE, SOURCES, chain_trees
from test_misses_folded_links_property import FLOORED
from test_misses_hashed_property import watched_run

import sim.cache.misses_hashing as hashing
from sim.tokens import TokenSeq


@st.composite
def keys_with_empty_runs(draw) -> TokenSeq:
    """A key of 1-3 runs as a trusted cut would hold them, some empty (``count`` 0), unmerged."""
    runs = [
        (draw(st.sampled_from(SOURCES)), draw(st.integers(0, 12)), draw(st.integers(0, 4)))
        for _ in range(draw(st.integers(1, 3)))
    ]
    return TokenSeq(runs, sum(run[2] for run in runs))


def assert_folds_equal(links: list) -> int:
    """Each link folded both ways from its parent's (the reference's) fold, parents first; the merges met."""
    folded: dict[int, tuple | None] = {id(None): None}
    merges = 0
    for link in links[1:]:
        above = folded[id(link[1])]
        fast, reference = hashing.fold_key_unpacked(above, link[0]), hashing.fold_key(above, link[0])
        assert fast == reference
        assert hashing.link_hash(fast) == hashing.link_hash(reference)
        merges += above is not None and fast[0] == above[0] and fast[1] is not None
        folded[id(link)] = reference
    return merges


@settings(max_examples=400, deadline=None)
@given(tree=chain_trees())
@example(tree=LINE)
def test_a_link_folds_as_the_reference_folds_it(tree):
    assert_folds_equal(tree[0])


@settings(max_examples=300, deadline=None)
@given(
    tops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(1, 4)), max_size=3),
    data=st.data(),
)
def test_empty_runs_and_bare_links_fold_as_the_reference(tops, data):
    """Keys with empty runs, below the root, a link of no last run (``(hash(()), None)``) or a real one."""
    keys = [data.draw(keys_with_empty_runs()) for _ in range(data.draw(st.integers(1, 6)))]
    links: list = [None, (TokenSeq([(SOURCES[s], start, count) for s, start, count in tops]), None)]
    for key in keys:
        links.append((key, links[data.draw(st.integers(0, len(links) - 1))]))
    assert_folds_equal(links)
    for key in keys:
        bare = (hash(()), None)
        assert hashing.fold_key_unpacked(bare, key) == hashing.fold_key(bare, key)


def test_the_line_merges_across_its_junctions():
    assert assert_folds_equal(LINE[0]) >= 2


def _assert_same_watchers(trace, config, monkeypatch) -> int:
    """The run with ``UNPACKED_FOLD`` on equals it off, watcher tables included; the entries made."""

    def run(unpacked: bool) -> tuple:
        monkeypatch.setattr(hashing, "UNPACKED_FOLD", unpacked)
        logs, result, watchers = watched_run(trace, config, monkeypatch, 1 << 16, True)
        tables = [(w.evicted_pages, list(w._prefix_links.values())) for w in watchers]
        return logs, result, tables

    (_, _, tables), (_, _, reference) = same_both_ways(run)
    assert tables == reference
    return sum(len(v) if type(v) is list else 1 for pages, _ in tables for v in pages.values())


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@pytest.mark.parametrize("index", range(len(FLOORED)))
def test_the_fixed_runs_fold_unpacked_as_the_reference(index, monkeypatch):
    trace, config, (entries, _) = FLOORED[index]
    assert _assert_same_watchers(trace, config, monkeypatch) >= entries


@pytest.mark.interpreted
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[2][:2])
def test_marconis_runs_fold_unpacked_as_the_reference(case, monkeypatch):
    _assert_same_watchers(*case, monkeypatch)
