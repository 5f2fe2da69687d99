"""Belady's present leaves keyed again to the next use they hold push no heap entry (``belady.UNMOVED_KEYS_UNPUSHED``)
against the reference (every key set pushes one).

With the switch on and off, Belady's hits and its cache's whole state at the end (counts, children counts, keys,
pages held, and the heap's live entries) must be equal, and in both every present leaf must hold a live entry (the
invariant the skipped pushes lean on). Generated event logs over the compressed and the per-page tries
(``test_segment_trie.event_logs``: chunked produces, uncounted lookups, interleaved requests) at tight and roomy
capacities; the generated timed runs of ``test_bounds_fast_paths_property.py`` and the conversation trace's head on
``no-cache`` timed with bounds, whole runs on against off; floors on the pushes skipped, so the path cannot go
dead unseen."""

from __future__ import annotations

import heapq
import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run
from test_bounds_fast_paths_property import timed_cases
from test_event_lengths_property import _real_head
from test_segment_trie import event_logs

from sim.bounds import belady
from sim.bounds.belady import belady_hits
from sim.bounds.events import Lookup, Produce
from sim.bounds.page_paths import PagePaths
from sim.bounds.segment_trie import SegmentTrie
from sim.cache.components import FULL
from sim.run import simulate as simulate_module
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.bounds_helpers import small_traces

# the cache class and the heap's push are patched: the compiled core would not see them
pytestmark = pytest.mark.interpreted

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))
CAPACITIES = (0, 1, 3, 7, 20, 1000)
HEAPPUSH = heapq.heappush


def cache_state(cache) -> tuple:
    """The cache's whole state, its heap read as the set of live entries (the stale ones any order may hold)."""
    live = {
        (node, -negative)
        for negative, node in cache.heap
        if cache.count[node] and not cache.children[node] and cache.key[node] == -negative
    }
    leaves = {
        (node, cache.key[node])
        for node in range(1, len(cache.count))
        if cache.count[node] and not cache.children[node]
    }
    assert live == leaves, "every present leaf holds a live entry, and only they"
    return list(cache.count), list(cache.children), list(cache.key), cache.size, sorted(live)


def belady_run(events: list, paths, capacity: int, on: bool, nodes_of=None) -> tuple:
    """Belady's hits with the switch as given, its cache's state at the end, and the heap pushes it made."""
    caches: list = []
    pushes = {"made": 0}

    class Recorded(belady._Cache):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            caches.append(self)

    def push(heap, entry) -> None:
        pushes["made"] += 1
        HEAPPUSH(heap, entry)

    with (
        mock.patch.object(belady, "UNMOVED_KEYS_UNPUSHED", on),
        mock.patch.object(belady, "_Cache", Recorded),
        mock.patch.object(belady.heapq, "heappush", push),
    ):
        hits = belady_hits(events, paths, capacity, nodes_of)
    return hits, cache_state(caches[0]), pushes["made"]


def pushes_skipped(events: list, paths, capacity: int, nodes_of=None) -> int:
    """Both runs held equal; how many pushes the switch-on run did not make."""
    on, off = (
        belady_run(events, paths, capacity, True, nodes_of),
        belady_run(events, paths, capacity, False, nodes_of),
    )
    assert on[:2] == off[:2]
    assert on[2] <= off[2]
    return off[2] - on[2]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), trace=small_traces(max_requests=8), page=st.sampled_from([1, 2, 4, 8]))
def test_belady_keys_equal_the_reference(data, trace, page):
    events = data.draw(event_logs(trace, page))
    for paths in (SegmentTrie(trace, page, events), PagePaths(trace, page)):
        for capacity in CAPACITIES:
            pushes_skipped(events, paths, capacity)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=timed_cases())
def test_the_generated_timed_runs_equal_the_reference(case):
    trace, config = case
    with mock.patch.object(belady, "UNMOVED_KEYS_UNPUSHED", False):
        reference = simulate(trace, config)
    assert_same_run(simulate(trace, config), reference)


def _captured_bounds(trace: Trace, config: SimConfig) -> tuple:
    """A run's result and the events, trie inputs and FULL capacity its bounds read."""
    captured: dict = {}
    run_bounds = simulate_module.run_bounds

    def capture(trace, events, manager, cached, seqs=None):
        captured.update(events=events, manager=manager, seqs=seqs)
        return run_bounds(trace, events, manager, cached, seqs)

    with mock.patch.object(simulate_module, "run_bounds", capture):
        result = simulate(trace, config)
    return result, captured


@pytest.mark.parametrize("limit", [40, 300])
def test_the_real_trace_head_equals_the_reference(limit):
    """``no-cache`` timed with bounds on the conversation trace's head: the whole run on against off, and Belady's
    cache on the run's own events at its FULL budget and tighter ones, the pushes skipped (seen at the run's budget, 64
    and 8 pages: 39, 39, 39 at 40 requests; 40, 15, 299 at 300)."""
    trace, config = _real_head(limit), SimConfig(policy="no-cache", mode="timed", bounds=True)
    result, captured = _captured_bounds(trace, config)
    with mock.patch.object(belady, "UNMOVED_KEYS_UNPUSHED", False):
        assert_same_run(result, simulate(trace, config))
    events, manager = captured["events"], captured["manager"]
    paths = SegmentTrie(trace, manager.page_size, events, captured["seqs"])
    nodes_of = [paths.pages(event) for event in events]
    budget = manager.capacities()[FULL]
    skipped = [pushes_skipped(events, paths, capacity, nodes_of) for capacity in (budget, 64, 8)]
    assert skipped[0] >= 30 and skipped[2] >= (30 if limit == 40 else 250)


def test_a_leaf_evicted_and_grown_again_at_its_old_key_is_queued():
    """A node evicted and grown again before any lookup moves its next use holds its old key: not present, it has
    no live entry, so the regrowth must push one (else the next eviction cannot find it). Three one-page nodes
    under the root, one page of room: ``a`` is evicted for ``b``, ``b`` looked up (its key past ``a``'s), ``a``
    produced again at its old key evicting ``b``, then ``c``, needed before ``a``, takes ``a``'s page and hits."""
    a, b, c = 1, 2, 3
    events = [
        Produce("r1", 0, 1),  # a, next looked up at 6
        Produce("r2", 0, 1),  # b, next at 2: a evicted
        Lookup("r2", 1, True),  # b hit, next at 7
        Produce("r3", 0, 1),  # a again, next still 6: b evicted
        Produce("r4", 0, 1),  # c, next at 5: a evicted
        Lookup("r4", 1, True),
        Lookup("r1", 1, True),
        Lookup("r5", 1, True),
    ]
    nodes_of = [[a], [b], [b], [a], [c], [c], [a], [b]]
    parent, length = [0, 0, 0, 0], [0, 1, 1, 1]
    for on in (True, False):
        with mock.patch.object(belady, "UNMOVED_KEYS_UNPUSHED", on):
            hits = belady.belady_node_hits(events, nodes_of, parent, length, 1)
        assert hits == {"r2": 1, "r4": 1, "r1": 0, "r5": 0}, on
