"""The miss watcher's evicted prefixes hashed in batches (``misses.MAX_UNHASHED``) and its equal misses sharing one
record, against the reference: chains kept until a lookup asks (``MAX_UNHASHED = None``), a record per miss.

A run with a tiny batch (0: every chain hashed as its leaf goes; 1, 3: a few at a time) and the reference run give
equal tables and summaries, equal ``misses`` (in order) and ``evicted_pages`` equal once both are hashed; the
pending list never holds more than the batch. Fixed cases hold floors, counted in the batched run: entries hashed
early, lookups that found an early-hashed prefix evicted (``next_page_evicted``), misses sharing a record. vLLM+'s
direct eviction (``misses_run.tell_evicted``) is held to the watcher's own handler with hashing on.
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
from test_page_chunks_property import workloads

import sim.cache.misses as misses
from sim.cache.misses_evicted import deferred, entry_int
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout

WATCHER_INIT = misses.TreeMissTracker.__post_init__


def watched_run(trace, config, monkeypatch, max_unhashed, folded: bool = False) -> tuple[list, object, list]:
    """Each miss watcher's ``misses`` in order, the run, and the watchers, ``MAX_UNHASHED`` and ``FOLD_ON_LINKS``
    set for it (the batches are the chains' path: folded links make each int at once,
    ``test_misses_folded_links_property.py``)."""
    watchers: list = []

    def kept(watcher):
        WATCHER_INIT(watcher)
        watchers.append(watcher)

    with monkeypatch.context() as patch:
        patch.setattr(misses, "MAX_UNHASHED", max_unhashed)
        patch.setattr(misses, "FOLD_ON_LINKS", folded)
        patch.setattr(misses.TreeMissTracker, "__post_init__", kept)
        result = simulate(trace, config)
    return [list(watcher.misses.items()) for watcher in watchers], result, watchers


def hashed(pages: dict, watcher=None) -> dict:
    """``evicted_pages`` with every chain (or sourced entry: ``watcher``'s) hashed, as a lookup would hash it."""
    seqs, sources = (watcher.request_seq, watcher.sources) if watcher is not None else (None, [])

    def as_hash(prefix) -> int:
        return entry_int(prefix, seqs, sources) if deferred(prefix) else prefix

    return {key: [as_hash(p) for p in v] if type(v) is list else as_hash(v) for key, v in pages.items()}


def num_ints(pages: dict) -> int:
    return sum(
        sum(isinstance(p, int) for p in v) if type(v) is list else isinstance(v, int) for v in pages.values()
    )


def assert_as_reference(trace, config, monkeypatch, max_unhashed: int) -> Counter:
    """The batched run equals the reference; returns what it reached."""
    (_, _, watchers), (_, _, reference_watchers) = same_both_ways(
        lambda batched: watched_run(trace, config, monkeypatch, max_unhashed if batched else None)
    )
    seen: Counter = Counter()
    for watcher, plain in zip(watchers, reference_watchers, strict=True):
        assert hashed(watcher.evicted_pages) == hashed(plain.evicted_pages)
        assert len(watcher.unhashed) <= max_unhashed
        seen["early"] += num_ints(watcher.evicted_pages) - num_ints(plain.evicted_pages)
        seen["evicted_hits"] += sum(miss.next_page_evicted for miss in watcher.misses.values())
        seen["shared"] += len(watcher.misses) - len({id(miss) for miss in watcher.misses.values()})
    return seen


FAN_OUT = (  # the benchmark's fan-out, small: every request misses alike, three leaves go per request
    fanout(num_groups=2, prompts_per_group=40),
    SimConfig(policy="freetoken", mode="replay", pool_tokens=12_000),
)
FLOORED = [  # (trace, config, floors: early, evicted_hits, shared), each a little under its count
    (*FIXED_CASES[0][:2], (100, 11, 5)),
    (*FIXED_CASES[1][:2], (90, 17, 5)),
    (*MARCONI_CASES[3][:2], (14, 10, 13)),  # Marconi, timed
    (*FAN_OUT, (170, 0, 78)),
]


@pytest.mark.interpreted  # patches module names, which the compiled core binds
@pytest.mark.parametrize("index", range(len(FLOORED)))
def test_the_fixed_runs_hash_early_and_equal_the_reference(index, monkeypatch):
    trace, config, (early, evicted_hits, shared) = FLOORED[index]
    seen = assert_as_reference(trace, config, monkeypatch, 0)
    assert seen["early"] >= early and seen["evicted_hits"] >= evicted_hits and seen["shared"] >= shared, seen


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]), max_unhashed=st.sampled_from([0, 1, 3]))
@example(case=FIXED_CASES[2][:2], mode="replay", max_unhashed=1)
@example(case=FIXED_CASES[3][:2], mode="timed", max_unhashed=3)
def test_freetokens_batched_hashing_equals_the_reference(case, mode, max_unhashed, monkeypatch):
    trace, config = case
    assert_as_reference(trace, replace(config, mode=mode), monkeypatch, max_unhashed)  # refused: rejected


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases(), max_unhashed=st.sampled_from([0, 1, 3]))
@example(case=MARCONI_CASES[2][:2], max_unhashed=1)
def test_marconis_batched_hashing_equals_the_reference(case, max_unhashed, monkeypatch):
    trace, config = case
    assert_as_reference(trace, config, monkeypatch, max_unhashed)


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cache=tight_vllm_caches(),
    requests=workloads(),
    one_loop=st.booleans(),
    max_unhashed=st.sampled_from([0, 1, 3]),
)
def test_vllms_direct_eviction_hashes_as_the_handler_does(
    cache, requests, one_loop, max_unhashed, monkeypatch
):
    monkeypatch.setattr(misses, "MAX_UNHASHED", max_unhashed)
    monkeypatch.setattr(misses, "FOLD_ON_LINKS", False)
    _compare(cache, requests, one_loop)
