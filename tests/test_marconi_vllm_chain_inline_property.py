"""vLLM+'s chain loop with each chunk's victim checks in its own body (``marconi_vllm_chain.CHECKS_INLINE``) is
the loop asking ``takes_victim`` (the switch off): the same chains taken, stopped at the same chunk.

Two ``marconi-vllm`` managers, alike but for the switch, run the same requests as
``test_marconi_vllm_chain_property`` runs them (its fixed runs and its generated ones: pages 1 to 64, SWA on and
off, watched by every event's recorder or by the miss watcher alone, the heap compacting at its floor or at 8);
after every request: the results, ``snapshot``, locks, the heap's current entries, stamps, clocks, hints and the
events or the watcher's tables, and the tree's integrity check. Whole runs, replay and timed, give the same
tables. Floors: chunks and chains taken with the switch on.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_marconi_vllm_chain_property import _FIXED
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_held_parent_property import _compare as compare_held
from test_page_chunks_property import workloads

from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.run.simulate import SimConfig, simulate

_TAKEN = {"chunks": 0, "chains": 0}


def _switched(observed, on: bool):
    """``observed.run`` with ``CHECKS_INLINE`` set to ``on`` while it runs."""
    run = observed.run

    def switched(*args):
        saved = chain_module.CHECKS_INLINE
        chain_module.CHECKS_INLINE = on
        try:
            return run(*args)
        finally:
            chain_module.CHECKS_INLINE = saved

    observed.run = switched
    return observed


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans(), st.booleans())
def _inline_checks_take_the_same_chains(cache, requests, watched, small):
    compare_held(cache, requests, watched, small, _switched)


@pytest.mark.interpreted
def test_inline_checks_take_the_same_chains(monkeypatch):
    take = chain_module.take_chain

    def counted(tree, rules, req, keys, held, evicted, has_swa):
        before = req.kv_len
        node = take(tree, rules, req, keys, held, evicted, has_swa)
        if node is not None and chain_module.CHECKS_INLINE:
            _TAKEN["chunks"] += (node.end - before) // tree.page_size
            _TAKEN["chains"] += 1
        return node

    monkeypatch.setattr(chain_module, "take_chain", counted)
    _TAKEN.update(chunks=0, chains=0)
    for args, _ in _FIXED:
        compare_held(*args, _switched)
    _inline_checks_take_the_same_chains()
    assert _TAKEN["chunks"] > 1500 and _TAKEN["chains"] > 200, _TAKEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_equal_either_way(mode, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=2400)
    ours = simulate(_trace(), config)
    monkeypatch.setattr(chain_module, "CHECKS_INLINE", False)
    theirs = simulate(_trace(), config)
    assert ours.summary["evictions_full"] > 100
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary
