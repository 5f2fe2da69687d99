"""vLLM+'s chunk run along an evicted chain in one loop (``marconi_vllm_chain.FUSES_CHAINS``) is the run's own
chunk steps (the switch off): each victim the last's held parent, each commit one new leaf, the counts, clocks,
stamps, the held entry and the state lock written once where the chain stops.

Two ``marconi-vllm`` managers, alike but for the switch, run the same requests as
``test_marconi_vllm_held_parent_property`` runs them (pools of a few dozen pages, pages 1 to 64, SWA on and off,
watched by every event's recorder or by the miss watcher alone, the heap compacting at its floor or at 8
entries, the hints forgetting all at 256 heads or at 3); after every request: the results, ``snapshot``, locks,
the heap's current entries, stamps, clocks, eviction counts, hints and the events or the watcher's tables, and
the tree's own integrity check (its counts). Whole runs, replay and timed, give the same tables.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_held_parent_property import _LONG, _cache
from test_marconi_vllm_held_parent_property import _compare as compare_held
from test_page_chunks_property import workloads

from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.run.simulate import SimConfig, simulate

_TAKEN = {"chunks": 0, "chains": 0}


def _switched(observed, on: bool):
    """``observed.run`` with ``FUSES_CHAINS`` set to ``on`` (held parents and deferred hints on) while it runs."""
    run = observed.run

    def switched(*args):
        saved = chain_module.FUSES_CHAINS
        chain_module.FUSES_CHAINS = on
        try:
            return run(*args)
        finally:
            chain_module.FUSES_CHAINS = saved

    observed.run = switched
    return observed


def _compare(cache, requests, watched: bool, small: bool) -> None:
    compare_held(cache, requests, watched, small, _switched)


# fixed runs, each with floors on the chunks the chain takes and the chains: chains of one family's prompts
# evicted by another's (page 1), with SWA windows sliding along them (pages 2 and 16; one wider than a chain),
# the heap compacting at 8
_FIXED = [
    ((_cache(1, False, 64, 40, 30), _LONG, True, False), (70, 3)),
    ((_cache(2, True, 8, 30, 20), _LONG, True, False), (45, 3)),
    ((_cache(16, True, 48, 20, 12), _LONG, True, True), (25, 3)),
    ((_cache(1, True, 5, 60, 40), _LONG, True, True), (100, 3)),
    ((_cache(1, True, 64, 40, 30), _LONG, True, False), (70, 3)),  # chains shorter than the window
]


@pytest.mark.interpreted
@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans(), st.booleans())
@example(*_FIXED[0][0])
@example(*_FIXED[1][0])
@example(*_FIXED[2][0])
@example(*_FIXED[3][0])
@example(*_FIXED[4][0])
def test_a_chain_in_one_loop_is_its_chunks_one_by_one(cache, requests, watched, small):
    _compare(cache, requests, watched, small)


# run once, inside test_the_property_takes_chains (which asserts what its examples reach)
test_a_chain_in_one_loop_is_its_chunks_one_by_one.__test__ = False


@pytest.mark.interpreted
def test_the_property_takes_chains(monkeypatch):
    """The runs above take chains of several chunks (2,535 chunks in 364 chains over the fixed and generated
    runs, the examples ``tests/hypothesis_pins.py`` fixes)."""
    take = chain_module.take_chain

    def counted(tree, rules, req, keys, held, evicted, has_swa, *watcher):
        before = req.kv_len
        node = take(tree, rules, req, keys, held, evicted, has_swa, *watcher)
        if node is not None and chain_module.FUSES_CHAINS:
            _TAKEN["chunks"] += (node.end - before) // tree.page_size
            _TAKEN["chains"] += 1
        return node

    monkeypatch.setattr(chain_module, "take_chain", counted)
    for args, (chunks, chains) in _FIXED:
        _TAKEN.update(chunks=0, chains=0)
        _compare(*args)
        assert _TAKEN["chunks"] >= chunks and _TAKEN["chains"] >= chains, (args[0][2:], _TAKEN)
    _TAKEN.update(chunks=0, chains=0)
    test_a_chain_in_one_loop_is_its_chunks_one_by_one()
    assert _TAKEN["chunks"] > 1500 and _TAKEN["chains"] > 200, _TAKEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_equal_either_way(mode, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=2400)
    ours = simulate(_trace(), config)
    monkeypatch.setattr(chain_module, "FUSES_CHAINS", False)
    theirs = simulate(_trace(), config)
    assert ours.summary["evictions_full"] > 100
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary
