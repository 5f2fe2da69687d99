"""The why watcher's links folded as they are made (``misses.FOLD_ON_LINKS``: an evicted prefix's int made at its
eviction, no chain kept, no batch) against the reference: chains kept until a lookup asks (``FOLD_ON_LINKS``
off, ``MAX_UNHASHED = None``).

Whole runs (FreeToken, Marconi, the fan-out; vLLM+'s direct eviction) come out equal, with equal ``misses`` and
``evicted_pages`` equal once the reference's chains are hashed; the folded run's entries are all ints at once.
Fixed cases hold floors: lookups that found an evicted prefix (``next_page_evicted``), entries made.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases
from test_marconi_vllm_chunks_property import tight_vllm_caches
from test_marconi_vllm_watcher_property import _compare
from test_misses_hashed_property import FAN_OUT, hashed, num_ints, watched_run
from test_page_chunks_property import workloads

import sim.cache.misses as misses


def assert_folded_as_reference(trace, config, monkeypatch) -> Counter:
    """The folded run equals the reference; returns what it reached."""
    (_, _, watchers), (_, _, reference_watchers) = same_both_ways(
        lambda folded: watched_run(trace, config, monkeypatch, None, folded)
    )
    seen: Counter = Counter()
    for watcher, plain in zip(watchers, reference_watchers, strict=True):
        assert watcher.evicted_pages == hashed(plain.evicted_pages)
        assert not watcher.unhashed
        entries = sum(len(v) if type(v) is list else 1 for v in watcher.evicted_pages.values())
        assert num_ints(watcher.evicted_pages) == entries
        seen["entries"] += entries
        seen["evicted_hits"] += sum(miss.next_page_evicted for miss in watcher.misses.values())
    return seen


FLOORED = [  # (trace, config, floors: entries, evicted_hits), each a little under its count
    (*FIXED_CASES[0][:2], (100, 11)),
    (*FIXED_CASES[1][:2], (90, 17)),
    (*MARCONI_CASES[3][:2], (14, 10)),  # Marconi, timed
    (*FAN_OUT, (170, 0)),
]


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@pytest.mark.parametrize("index", range(len(FLOORED)))
def test_the_fixed_runs_fold_and_equal_the_reference(index, monkeypatch):
    trace, config, (entries, evicted_hits) = FLOORED[index]
    seen = assert_folded_as_reference(trace, config, monkeypatch)
    assert seen["entries"] >= entries and seen["evicted_hits"] >= evicted_hits, seen


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
@example(case=FIXED_CASES[2][:2], mode="replay")
@example(case=FIXED_CASES[3][:2], mode="timed")
def test_freetokens_folded_links_equal_the_reference(case, mode, monkeypatch):
    trace, config = case
    assert_folded_as_reference(trace, replace(config, mode=mode), monkeypatch)  # refused: rejected


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[2][:2])
def test_marconis_folded_links_equal_the_reference(case, monkeypatch):
    trace, config = case
    assert_folded_as_reference(trace, config, monkeypatch)


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cache=tight_vllm_caches(), requests=workloads(), one_loop=st.booleans())
def test_vllms_direct_eviction_folds_as_the_handler_does(cache, requests, one_loop, monkeypatch):
    monkeypatch.setattr(misses, "FOLD_ON_LINKS", True)
    _compare(cache, requests, one_loop)
