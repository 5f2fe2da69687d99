"""The LRU leaf heap's compaction keeps the heap's current entries (``FROM_CURRENT_ENTRIES``) instead of walking
the tree for its leaves (the reference, the switch off).

At every compaction of every run here the kept entries must be the walk's, one per leaf at its stamp (a leaf
without a current entry would be missed by the kept ones and found by the walk), and whole runs with the switch
on and off must leave the same managers after every step and the same tables. The generated runs lower the
compaction's floor and ratio (at (1, 1) due whenever the heap holds more entries than the tree leaves; at
(16, 4) stale entries of a node outlive its next leaf time), so that small bursts compact often (``marconi-vllm`` and ``marconi-sglang``,
replay and timed, pages 1 to 64, tight pools and the presets'); fixed runs at the real floor compact as the
Mooncake runs do (``marconi-vllm`` timed at page 1, a tree of many more nodes than leaves).
"""

from __future__ import annotations

import dataclasses
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from managers_watched import assert_watched_equal, managers_watched
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_run_property import _stamps, current_entries
from test_marconi_vllm_victims import _delete, _tree
from test_page_plans_property import bursts

from sim.cache.engines import marconi_lru
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

_REAL_COMPACT = marconi_lru.LeafHeap._compact
_COUNTS = {"compactions": 0, "dropping": 0, "older": 0}

# the runs count and watch through patches of names the compiled core binds
pytestmark = pytest.mark.interpreted


def _checked_compact(heap, root, stamp_of) -> None:
    """The compaction, where it is due, after checking that the heap's current entries are the walk's."""
    if len(heap.heap) > heap.compact_at:
        walked = sorted((stamp_of(node), node.id) for node in marconi_lru._leaves(root))
        kept = sorted(
            (stamp, node_id) for stamp, node_id, _ in marconi_lru.current_entries(heap.heap, stamp_of)
        )
        assert kept == walked, (len(kept), len(walked))
        _COUNTS["compactions"] += 1
        _COUNTS["dropping"] += len(heap.heap) > len(kept)  # stale or repeated entries left out
        _COUNTS["older"] += any(  # a leaf's entry at an older stamp left out
            node.alive and not node.children and stamp != stamp_of(node) for stamp, _, node in heap.heap
        )
    _REAL_COMPACT(heap, root, stamp_of)


def watched_run(trace: Trace, config: SimConfig, kept: bool, due: tuple[int, int], every_step: bool):
    """The run with ``FROM_CURRENT_ENTRIES`` as given and the compaction's floor and ratio ``due``, and its
    manager's state after every step (``every_step``, timed) and at the end."""
    with (
        managers_watched(_state) as (managers, states, step),
        mock.patch.object(marconi_lru, "FROM_CURRENT_ENTRIES", kept),
        mock.patch.object(marconi_lru, "_COMPACT_FLOOR", due[0]),
        mock.patch.object(marconi_lru, "_COMPACT_RATIO", due[1]),
        mock.patch.object(marconi_lru.LeafHeap, "_compact", autospec=True, side_effect=_checked_compact),
    ):
        result = simulate(trace, config, on_step=step if every_step else None)
        states.append(_state(managers[0]))
    return result, states


def _state(manager) -> tuple:
    return (
        snapshot(manager),
        _stamps(manager),
        current_entries(manager),
        manager.rules.recency.leaves.compact_at,
    )


def _compare(trace: Trace, config: SimConfig, due: tuple[int, int], every_step: bool) -> None:
    ours, our_states = watched_run(trace, config, True, due, every_step)
    theirs, their_states = watched_run(trace, config, False, due, every_step)
    assert_watched_equal(ours, our_states, theirs, their_states)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    bursts(),
    st.sampled_from(["marconi-vllm", "marconi-sglang"]),
    st.sampled_from(["timed", "replay"]),
    st.booleans(),
    st.sampled_from([(1, 1), (8, 2), (16, 4)]),
)
def test_the_kept_entries_are_the_walks_leaves(burst, policy, mode, tight, due):
    trace, config = burst
    if tight:  # two pages over the longest request: nearly every chunk evicts
        page = config.knobs["page_size"]
        longest = max(trace.prompt_len(request.id) + request.output_len for request in trace.requests)
        pool_pages = -(-longest // page) + 2
        config = dataclasses.replace(config, pool_tokens=pool_pages * page, mamba_states=pool_pages)
    if policy == "marconi-sglang":  # SGLang's loop: no checkpoint at every page
        knobs = {k: v for k, v in config.knobs.items() if k != "track_interval"}
        config = dataclasses.replace(config, knobs=knobs)
    _compare(trace, dataclasses.replace(config, policy=policy, mode=mode), due, every_step=mode == "timed")


# the property runs once, inside test_the_property_compacts (which also asserts what its examples reach)
test_the_kept_entries_are_the_walks_leaves.__test__ = False


def test_the_property_compacts():
    """The generated runs compact many times, leaving entries out."""
    _COUNTS.update(compactions=0, dropping=0, older=0)
    test_the_kept_entries_are_the_walks_leaves()
    assert _COUNTS["compactions"] > 200 and _COUNTS["dropping"] > 100, _COUNTS


@pytest.mark.parametrize("model", ["tiny", "inkling"])
def test_a_long_prefill_compacts_at_the_real_floor(model):
    """Four long prompts at page 1 beside each other's decodes, in a pool of a third of their tokens: the heap
    passes 4,096 entries, so the real floor compacts, over a tree of thousands of nodes and few leaves (the
    managers compared at the end; the entries at each compaction)."""
    requests = [
        Request(
            id=f"r{index}",
            arrival=index * 0.01,
            prompt=[Segment(ref="head", len=200), Segment(ref=f"own{index}", len=3000 + 300 * index)],
            output_len=40,
        )
        for index in range(4)
    ]
    knobs = dict(page_size=1, track_interval=1, chunked_prefill_size=64, max_running_requests=4)
    config = SimConfig(
        policy="marconi-vllm", model=model, knobs=knobs, bounds=False, pool_tokens=9000, mamba_states=9000
    )
    _COUNTS.update(compactions=0, dropping=0, older=0)
    _compare(Trace(requests), config, (marconi_lru._COMPACT_FLOOR, marconi_lru._COMPACT_RATIO), False)
    assert _COUNTS["compactions"] >= 2 and _COUNTS["dropping"] >= 2, _COUNTS


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 29), st.integers(0, 12)), max_size=60),
    st.lists(st.integers(0, 29), max_size=4),
    st.sampled_from([(1, 1), (4, 2), (8, 4)]),
)
def test_picks_after_compactions_are_the_walks_property(parents, restamps, locked, due):
    """On hand-built trees (``test_marconi_vllm_victims``' ``_tree``): every leaf stamped, then nodes stamped
    again (the older entries stale by stamp, the newer current), some leaves locked; two heaps, one compacted
    from its current entries and one from the walk, pick and lose leaves (``_delete``: the parent takes the
    stamp, as ``Recency.forget``) until none is left: the same victim at every pick, the same entries at
    every compaction."""
    root, nodes = _tree(parents)
    recency = Recency(whole_paths=True)
    heaps = LeafHeap(), LeafHeap()
    stamps = [(index, 0) for index, node in enumerate(nodes) if not node.children] + restamps
    for index, stamp in stamps:
        node = nodes[index % len(nodes)]
        recency.stamps[node.id] = max(recency.stamps.get(node.id, 0), stamp)  # a node's stamps only grow
        for heap in heaps:
            heap.push(node, recency.stamps[node.id])
    for index in locked:
        nodes[index % len(nodes)].full_lock += 1
    with (
        mock.patch.object(marconi_lru, "_COMPACT_FLOOR", due[0]),
        mock.patch.object(marconi_lru, "_COMPACT_RATIO", due[1]),
    ):
        for heap in heaps:
            heap.compact_at = due[0]
        while True:
            with mock.patch.object(marconi_lru, "FROM_CURRENT_ENTRIES", True):
                ours = _checked_pick(heaps[0], root, recency)
            with mock.patch.object(marconi_lru, "FROM_CURRENT_ENTRIES", False):
                theirs = heaps[1].pick(root, recency.of)
            assert ours is theirs
            assert sorted(entry[:2] for entry in heaps[0].heap) == sorted(
                entry[:2] for entry in heaps[1].heap
            )
            if ours is None or ours.is_locked:
                return
            _delete(recency, list(heaps), ours)


# the property runs once, inside test_picks_after_compactions_are_the_walks (which asserts what it reaches)
test_picks_after_compactions_are_the_walks_property.__test__ = False


def test_picks_after_compactions_are_the_walks():
    """The hand-built heaps compact many times, often with a leaf's older entry to leave out."""
    _COUNTS.update(compactions=0, dropping=0, older=0)
    test_picks_after_compactions_are_the_walks_property()
    assert _COUNTS["compactions"] > 300 and _COUNTS["older"] > 50, _COUNTS


def _checked_pick(heap: LeafHeap, root, recency: Recency):
    with mock.patch.object(LeafHeap, "_compact", autospec=True, side_effect=_checked_compact):
        return heap.pick(root, recency.of)
