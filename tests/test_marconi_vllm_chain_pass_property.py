"""vLLM+'s chain in one pass (``marconi_vllm_chain_pass.ONE_PASS``: a victim's empty children and window holders
passed to its new leaf, the window slid once over the leaves it keeps, the key cut in its run, the victim's
checks in line) is ``take_chain``'s own loop (the switch off), with the chain itself on either way.

The same managers and requests as ``test_marconi_vllm_chain_property`` (pools of a few dozen pages, pages 1 to 64,
SWA windows on and off, watched by every event's recorder or by the miss watcher alone, the heap compacting at
its floor or at 8 entries); after every request the results, ``snapshot``, locks (the window's list and cover),
the heap's current entries, stamps, clocks, counts and the events or the watcher's tables, and the tree's
integrity check. Whole runs, replay and timed, give the same tables, and so do conversations whose turns hold
the last turn's output (a chain up an old turn stops at its output's node of several pages: the property's
requests make no such node).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_marconi_vllm_chain_property import _FIXED
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_held_parent_property import _compare as compare_held
from test_page_chunks_property import workloads

from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.cache.engines import marconi_vllm_chain_pass as chain_pass
from sim.cache.integrity import IntegrityError
from sim.run.simulate import SimConfig, simulate
from sim.trace import Segment
from sim.trace.records import Request
from sim.trace.trace import Trace
from tests.cache_helpers import manager

_TAKEN = {"chunks": 0, "slides": 0, "let_go": 0, "never_listed": 0}


def _switched(observed, on: bool):
    """``observed.run`` with ``ONE_PASS`` set to ``on`` (the chain, held parents and deferred hints on)."""
    run = observed.run

    def switched(*args):
        saved = chain_pass.ONE_PASS, chain_module.FUSES_CHAINS
        chain_pass.ONE_PASS, chain_module.FUSES_CHAINS = on, True
        try:
            return run(*args)
        finally:
            chain_pass.ONE_PASS, chain_module.FUSES_CHAINS = saved

    observed.run = switched
    return observed


def _compare(cache, requests, watched: bool, small: bool) -> None:
    compare_held(cache, requests, watched, small, _switched)


@pytest.mark.interpreted
@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans(), st.booleans())
@example(*_FIXED[0][0])
@example(*_FIXED[1][0])
@example(*_FIXED[2][0])
@example(*_FIXED[3][0])
@example(*_FIXED[4][0])
def test_a_chain_in_one_pass_is_its_loop(cache, requests, watched, small):
    _compare(cache, requests, watched, small)


# run once, inside test_the_property_takes_chains_in_one_pass (which asserts what its examples reach)
test_a_chain_in_one_pass_is_its_loop.__test__ = False


@pytest.mark.interpreted
def test_the_property_takes_chains_in_one_pass(monkeypatch):
    """The runs above take chains in one pass and slide windows past some of their new leaves."""
    hang, slide = chain_pass.hang_chain, chain_pass.slide_once

    def counted_hang(*args):
        hung = hang(*args)
        _TAKEN["chunks"] += hung[-1]
        return hung

    def counted_slide(bottom, count, nodes, holder, covered, window, page):
        before = len(nodes)
        covered = slide(bottom, count, nodes, holder, covered, window, page)
        _TAKEN["slides"] += 1
        _TAKEN["let_go"] += before + count - len(nodes)
        _TAKEN["never_listed"] += max(0, count - len(nodes))  # new leaves let go: all the old ones went first
        return covered

    monkeypatch.setattr(chain_pass, "hang_chain", counted_hang)
    monkeypatch.setattr(chain_pass, "slide_once", counted_slide)
    for args, _ in _FIXED:
        _compare(*args)
    test_a_chain_in_one_pass_is_its_loop()
    # 2,596 chunks, 218 slides letting 1,227 nodes go, 791 of them new leaves never listed (the pinned examples)
    assert _TAKEN["chunks"] > 2000 and _TAKEN["slides"] > 150 and _TAKEN["never_listed"] > 500, _TAKEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_equal_either_way(mode, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=2400)
    ours = simulate(_trace(), config)
    monkeypatch.setattr(chain_pass, "ONE_PASS", False)
    theirs = simulate(_trace(), config)
    assert ours.summary["evictions_full"] > 100
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


def _conversations() -> Trace:
    """Five conversations of four turns, each turn's prompt the last turn's prompt and output and new tokens."""
    requests: list[Request] = []
    prompts: dict[str, list[Segment]] = {}
    for turn in range(4):
        for talk in range(5):
            rid, last = f"c{talk}t{turn}", f"c{talk}t{turn - 1}"
            head = (
                prompts[last] + [Segment(output_of=last)]
                if turn
                else [Segment(ref=f"sys{talk % 2}", len=200)]
            )
            prompts[rid] = head + [Segment(ref=f"u{rid}", len=60 + 37 * ((talk + turn) % 5))]
            requests.append(
                Request(id=rid, arrival=len(requests) * 0.01, prompt=prompts[rid], output_len=40 + 13 * talk)
            )
    return Trace(requests)


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("pool_tokens", [2400, 3200])
def test_conversations_are_equal_either_way(mode, pool_tokens, monkeypatch):
    config = SimConfig(
        policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=pool_tokens
    )
    ours = simulate(_conversations(), config)
    monkeypatch.setattr(chain_pass, "ONE_PASS", False)
    theirs = simulate(_conversations(), config)
    assert ours.summary["evictions_full"] > 50
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


@pytest.mark.parametrize("planted", ["children", "holders"])
def test_a_write_into_a_dead_victims_shared_dict_or_set_fails_the_integrity_check(planted, monkeypatch):
    """The dead victims share one empty dict and set (``_GONE_CHILDREN``, ``_GONE_HOLDERS``): a write into either
    would reach every later run in the process, so the integrity check refuses it."""
    cache = manager("marconi-vllm")
    cache.check_integrity()
    if planted == "children":
        monkeypatch.setitem(chain_pass._GONE_CHILDREN, ("planted",), cache.tree.root)
    else:
        monkeypatch.setattr(chain_pass, "_GONE_HOLDERS", {"planted"})
    with pytest.raises(IntegrityError, match="dead chain victim"):
        cache.check_integrity()
