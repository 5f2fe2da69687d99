"""vLLM+'s chunk evicted for and committed directly (``sim/cache/engines/marconi_vllm_chunks.py``) is the
chunk through the general layers (``MarconiVllmRules.fused_chunks`` off: ``MarconiEvictor.reserve`` and
``MarconiRules.insert``).

Two ``marconi-vllm`` managers, alike but for that switch, run the same requests through ``run_alone`` on
pools of a few dozen pages (every chunk evicts, some requests are refused), pages 1, 2, 16, 32 and 64, with
and without SWA; after every request the two are compared whole, as ``test_page_chunks_property`` compares
them (results, ``snapshot``, stamps, clocks, walk hints, every event in order). Both the one-loop chunks
(``page_chunks.py``) and the per-chunk calls take the direct paths, so each is run both ways. Whole runs, replay
and timed, bounds on and off, give the same tables and summary.
"""

from __future__ import annotations

import pytest
from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import snapshot
from test_page_chunks_property import Recorded, state, workloads

from sim.cache.engines import marconi_vllm_chunks as chunks
from sim.cache.engines.marconi_vllm import MarconiVllmRules
from sim.cache.sizing import PoolSizes
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

_TAKEN = {"evicted": 0, "committed": 0, "direct": 0, "handed": 0}


@st.composite
def tight_vllm_caches(draw):
    page = draw(st.sampled_from([1, 2, 16, 32, 64]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(1, 6)))
    window = draw(st.one_of(st.integers(1, 90), st.integers(1, 5).map(lambda pages: pages * page)))
    model = hybrid_model(swa=draw(st.sampled_from([True, False])), mamba=True, window=window)
    pages = draw(st.integers(4, 60)) * 16 // max(page, 16) + 3
    sizes = PoolSizes(pages, pages, draw(st.integers(3, 40)))
    return "marconi-vllm", model, knobs, sizes


def _counting(monkeypatch):
    """Count the direct paths' work (the property must compare runs that take them)."""
    evict, commit = chunks.MarconiEvictor.evict, chunks.commit_leaf_chunk

    def counted_evict(self, tree, victim, stale):
        _TAKEN["evicted"] += 1
        return evict(self, tree, victim, stale)

    def counted_commit(*args):
        done = commit(*args)
        _TAKEN["committed"] += done
        return done

    direct = chunks.evict_lone_leaf

    def counted_direct(tree, recency, victim, hand_over=False, told=None):
        _TAKEN["direct"] += 1
        _TAKEN["handed"] += hand_over
        return direct(tree, recency, victim, hand_over, told)

    monkeypatch.setattr(chunks.MarconiEvictor, "evict", counted_evict)
    monkeypatch.setattr(chunks, "evict_lone_leaf", counted_direct)
    monkeypatch.setattr("sim.cache.engines.marconi_vllm.commit_leaf_chunk", counted_commit)


def _log_locks(recorded: Recorded) -> None:
    """After each chunk's commit, the request's locks into the event log: a request's locks are gone when
    it finishes, so a wrong slide shows only between its chunks."""
    rules = recorded.manager.rules
    commit = rules.after_prefill_chunk

    def logged(manager, req, is_last):
        commit(manager, req, is_last)
        held = req.locks
        window = tuple((node.start, node.end) for node in held.swa_nodes)
        state_node = None if held.state_node is None else held.state_node.end
        recorded.log.append(("locks", held.node.end, window, held.swa_covered, state_node, held.in_walk_order))

    rules.after_prefill_chunk = logged


def _compare(cache, requests, one_loop: bool) -> None:
    fused, general = Recorded(*cache, fast=one_loop), Recorded(*cache, fast=one_loop)
    general.manager.rules.fused_chunks = False
    fused.manager.rules.chunk_runs = False  # the chunks one by one (the run: test_marconi_vllm_run_property.py)
    fused.manager.rules.page_steps = False  # the fused functions (the run's per step: test_page_plans_property.py)
    _log_locks(fused)
    _log_locks(general)
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        fused_result = fused.run(rid, tokens, shared_len + own_len, output_len)
        general_result = general.run(rid, tokens, shared_len + own_len, output_len)
        assert fused_result == general_result, f"request {rid}"
        assert snapshot(fused.manager) == snapshot(general.manager), f"after {rid}"
        assert state(fused) == state(general), f"after {rid}"
        fused.manager.check_integrity()


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans())
def test_direct_chunks_are_the_general_path(cache, requests, one_loop):
    _compare(cache, requests, one_loop)


# the property runs once, inside test_the_property_takes_the_direct_paths (which also asserts what its examples reach):
# collected on its own too, it ran its examples twice
test_direct_chunks_are_the_general_path.__test__ = False


@pytest.mark.interpreted
def test_the_property_takes_the_direct_paths(monkeypatch):
    """The runs above do evict and commit directly, many times (else the property compares nothing)."""
    _TAKEN.update(evicted=0, committed=0, direct=0, handed=0)
    _counting(monkeypatch)
    test_direct_chunks_are_the_general_path()
    assert _TAKEN["committed"] > 1000 and _TAKEN["evicted"] > 1000, _TAKEN
    # the lone-leaf eviction, and its hand-over of the victim's slots to a page chunk (marconi_vllm_direct.py)
    assert _TAKEN["handed"] > 1000 and _TAKEN["direct"] - _TAKEN["handed"] > 100, _TAKEN


def _trace() -> Trace:
    """Three shared heads, prompts of 300 to 1,800 tokens, outputs crossing blocks, arrivals overlapping."""
    return Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i * 0.015,
                prompt=[Segment(ref=f"sys{i % 3}", len=300 + 40 * (i % 4)), Segment(ref=f"u{i}", len=50 + 90 * i)],
                output_len=20 + 11 * i,
            )
            for i in range(16)
        ]
    )


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("bounds", [False, True])
def test_whole_runs_are_equal_either_way(mode, bounds, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=bounds, pool_tokens=2400)
    fused = simulate(_trace(), config)
    monkeypatch.setattr(MarconiVllmRules, "fused_chunks", False)
    general = simulate(_trace(), config)
    assert fused.summary["evictions_full"] > 100
    assert fused.requests.equals(general.requests) and fused.steps.equals(general.steps)
    assert fused.summary == general.summary
