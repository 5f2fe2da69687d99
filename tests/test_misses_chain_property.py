"""vLLM+'s chain telling the why watcher in its own pass (``marconi_vllm_chain_pass.TELLS_IN_PASS``, ``misses_chain``)
and making each victim's ``Node`` its new leaf (``REUSES_VICTIMS``) is the chain keeping its victims on the run's
list for ``misses_run.tell_evicted`` and making new nodes (both off); ``NoEviction`` read as ``leaves_only``
(``eviction.UNHEARD_INNER_RELEASES``: ``unlock`` skips the releases it would not hear) is every release told.

The same managers and requests as ``test_marconi_vllm_chain_pass_property`` (pools of a few dozen pages, pages 1
to 64, SWA on and off, watched by every event's recorder or by the miss watcher alone, the heap compacting at its
floor or at 8 entries, the walk hints forgetting at 256 heads or at 3); after every request the results,
``snapshot``, locks, the heap's current entries, stamps, clocks, hints and the watcher's tables (its spans and
sources among them), and the tree's integrity check. Whole runs and conversations, replay and timed, give the same
tables, with all three on and all three off.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cache_helpers import workload_request
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_chain_pass_property import _conversations
from test_marconi_vllm_chain_property import _FIXED
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_held_parent_property import _compare as compare_held
from test_marconi_vllm_run_property import _stamps, current_entries
from test_marconi_vllm_watcher_property import Watched
from test_page_chunks_property import workloads

from sim.cache import eviction, locks, misses_chain, walk_hints
from sim.cache.engines import marconi_lru
from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.cache.engines import marconi_vllm_chain_pass as chain_pass
from sim.run.simulate import SimConfig, simulate

_SWITCHES = ("TELLS_IN_PASS", "REUSES_VICTIMS")
_TAKEN = {"spans": 0, "reused": 0}


def _switched(observed, on: bool):
    """``observed.run`` with the two chain switches set to ``on`` (the chain in one pass either way)."""
    run = observed.run

    def switched(*args):
        saved = (
            [getattr(chain_pass, name) for name in _SWITCHES],
            chain_pass.ONE_PASS,
            chain_module.FUSES_CHAINS,
        )
        for name in _SWITCHES:
            setattr(chain_pass, name, on)
        chain_pass.ONE_PASS = chain_module.FUSES_CHAINS = True
        try:
            return run(*args)
        finally:
            for name, value in zip(_SWITCHES, saved[0], strict=True):
                setattr(chain_pass, name, value)
            chain_pass.ONE_PASS, chain_module.FUSES_CHAINS = saved[1], saved[2]

    observed.run = switched
    return observed


def _compare(cache, requests, watched: bool, small: bool, hinted: bool = False) -> None:
    """Watched: the miss watcher alone with a trace's ``request_seq`` (its spans on, the pass telling it);
    else every event's recorder (no chain telling: the recorder hears each eviction). ``hinted``: before each
    request, each family's last sequence remembered mid-path (``_hint_mid_paths``) in both managers."""
    if not watched:
        compare_held(cache, requests, watched, small, _switched)
        return
    seqs: dict = {}  # the requests' tokens by id, as a run's trace gives them (``Trace.request_seq``)
    last_tokens: dict = {}  # each family's last request's tokens (``hinted``)
    trace = SimpleNamespace(request_seq=lambda request_id: seqs[request_id])
    saved = marconi_lru._COMPACT_FLOOR, walk_hints._MAX_REMEMBERED
    if small:
        marconi_lru._COMPACT_FLOOR, walk_hints._MAX_REMEMBERED = 8, 3
    try:
        ours, theirs = (_switched(_watched(cache, trace), on) for on in (True, False))
        for index, workload in enumerate(requests):
            rid, tokens, request = workload_request(index, *workload)
            seqs[rid] = tokens
            if hinted:
                for observed in (ours, theirs):
                    _hint_mid_paths(observed.manager.tree, last_tokens)
                last_tokens[workload[0]] = tokens  # by family
            assert ours.run(*request) == theirs.run(*request)
            assert snapshot(ours.manager) == snapshot(theirs.manager), f"after {rid}"
            assert current_entries(ours.manager) == current_entries(theirs.manager), f"after {rid}"
            assert _stamps(ours.manager) == _stamps(theirs.manager), f"after {rid}"
            # ``_deleted`` read as its handlers read it (``deleted_read``): None where victims live on
            assert ours.tables() == theirs.tables(), f"after {rid}"
            assert _spans(ours.watcher) == _spans(theirs.watcher), f"after {rid}"
            deleted = ours.watcher._deleted  # never a live node: it would not hear that node's tombstone
            assert deleted is None or not deleted.alive, f"after {rid}"
            ours.manager.check_integrity()
    finally:
        marconi_lru._COMPACT_FLOOR, walk_hints._MAX_REMEMBERED = saved


def _hint_mid_paths(tree, last_tokens: dict) -> None:
    """Each family's last sequence remembered at its node ending nearest half its length, as a walk of a
    shorter prompt leaves it: a chain evicting that path meets a victim a hint names (not reused)."""
    page = tree.page_size
    for tokens in last_tokens.values():
        node, half = tree.root, len(tokens) // 2
        while node.end + page <= len(tokens):
            child = node.children.get(tokens.first_page(page, node.end))
            if child is None or child.end > half:
                break
            node = child
        if node is not tree.root:
            tree.hints.remember(tokens, node)


def _watched(cache, trace) -> Watched:
    observed = Watched(*cache, True, True, trace)
    observed.manager.rules.chunk_runs = True
    return observed


def _spans(watcher) -> tuple:
    spans = watcher.spans
    return (
        tuple(spans.spans),
        spans.num_indexed,
        dict(spans.heads),
        list(spans.segments),
        list(watcher.sources),
    )


def _chain_runs(test):
    """The chain tests' property (as ``test_marconi_vllm_chain_pass_property``'s): 200 derandomized runs over tight
    caches, workloads and the two flags, the five fixed chains first, in their order."""
    for fixed in reversed(_FIXED[:5]):
        test = example(*fixed[0])(test)
    test = given(tight_vllm_caches(), workloads(), st.booleans(), st.booleans())(test)
    return settings(max_examples=200, deadline=None, derandomize=True)(test)


@pytest.mark.interpreted
@_chain_runs
def test_a_chain_telling_in_its_pass_is_the_list_told_after(cache, requests, watched, small):
    _compare(cache, requests, watched, small)


# run once, inside test_the_property_tells_spans_and_reuses_victims (which asserts what its examples reach)
test_a_chain_telling_in_its_pass_is_the_list_told_after.__test__ = False


@pytest.mark.interpreted
def test_the_property_tells_spans_and_reuses_victims(monkeypatch):
    """The runs above put chains' victims on spans in the pass and make victims new leaves."""
    add_span = misses_chain.add_span

    def counted_span(watcher, source, start, end):
        if source is not misses_chain.NO_SPAN and chain_pass.REUSES_VICTIMS:
            _TAKEN["spans"] += 1
            _TAKEN["reused"] += (end - start) // watcher.tree.page_size
        add_span(watcher, source, start, end)

    monkeypatch.setattr(misses_chain, "add_span", counted_span)
    for args, _ in _FIXED:
        _compare(*args)
    test_a_chain_telling_in_its_pass_is_the_list_told_after()
    assert _TAKEN["spans"] > 100 and _TAKEN["reused"] > 1000, _TAKEN


@pytest.mark.interpreted
@settings(max_examples=100, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans())
@example(_FIXED[0][0][0], _FIXED[0][0][1], False)
@example(_FIXED[1][0][0], _FIXED[1][0][1], False)
@example(_FIXED[2][0][0], _FIXED[2][0][1], True)
def test_a_chain_meeting_hinted_victims_is_the_list_told_after(cache, requests, small):
    _compare(cache, requests, True, small, hinted=True)


# run once, inside test_the_property_meets_hinted_victims (which asserts what its examples reach)
test_a_chain_meeting_hinted_victims_is_the_list_told_after.__test__ = False


@pytest.mark.interpreted
def test_the_property_meets_hinted_victims(monkeypatch):
    """The hinted runs above start chains while a hint names a node the chain then evicts (left dead)."""
    hinted_nodes, met = chain_pass.hinted_nodes, []

    def recorded(tree):
        hinted = hinted_nodes(tree)
        met.append(hinted)
        return hinted

    monkeypatch.setattr(chain_pass, "hinted_nodes", recorded)
    test_a_chain_meeting_hinted_victims_is_the_list_told_after()
    num_met = sum(1 for hinted in met for node in hinted if not node.alive)
    assert num_met > 20, num_met


def _all(monkeypatch, on: bool) -> None:
    for name in _SWITCHES:
        monkeypatch.setattr(chain_pass, name, on)
    monkeypatch.setattr(eviction, "UNHEARD_INNER_RELEASES", on)


@pytest.mark.interpreted
@pytest.mark.parametrize("policy", ["marconi-vllm", "marconi"])
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_equal_either_way(policy, mode, monkeypatch):
    config = SimConfig(policy=policy, model="qwen3-next", mode=mode, bounds=False, pool_tokens=2400)
    _all(monkeypatch, True)
    ours = simulate(_trace(), config)
    _all(monkeypatch, False)
    theirs = simulate(_trace(), config)
    assert ours.summary["evictions_full"] > (100 if policy == "marconi-vllm" else 10)
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


@pytest.mark.interpreted
@pytest.mark.parametrize(("mode", "pool_tokens"), [(m, p) for p in (2400, 3200) for m in ("replay", "timed")])
def test_conversations_are_equal_with_all_three_either_way(mode, pool_tokens, monkeypatch):
    config = SimConfig(
        policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=pool_tokens
    )
    _all(monkeypatch, True)
    ours = simulate(_conversations(), config)
    _all(monkeypatch, False)
    theirs = simulate(_conversations(), config)
    assert ours.summary["evictions_full"] > 50
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary


@pytest.mark.interpreted
@pytest.mark.parametrize("policy", ["marconi-vllm", "marconi"])
def test_no_eviction_unlocks_in_the_lean_loop_with_the_switch(policy, monkeypatch):
    """``UNHEARD_INNER_RELEASES`` on: Marconi's tree (``NoEviction``) reads as ``leaves_only``, so every finish's
    ``unlock`` takes its lean loop; off, none does (the path cannot go dead unseen)."""
    lean = locks._unlock_leaves_only
    num_lean = {True: 0, False: 0}
    config = SimConfig(policy=policy, model="qwen3-next", mode="replay", bounds=False, pool_tokens=2400)
    for on in (True, False):

        def counted(*args, on=on):
            num_lean[on] += 1
            lean(*args)

        monkeypatch.setattr(locks, "_unlock_leaves_only", counted)
        _all(monkeypatch, on)
        simulate(_trace(), config)
    assert num_lean[True] > 10 and num_lean[False] == 0, num_lean
