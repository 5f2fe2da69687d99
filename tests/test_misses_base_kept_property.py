"""The why watcher's sourced entries made from one ``sourced_base`` for a request's leaves told in a row
(``misses_evicted.BASE_KEPT``) against ``sourced_entry`` a leaf (the reference): the same table, key by key in
the same order, each list in the same order, the same ``sources``.

Two ``marconi-vllm`` managers, each watched by its ``TreeMissTracker`` alone and both sourced, run the same
requests on tight pools (the chunk run's chains, the rules' own evictions, refusals; SWA on and off), one with
the switch on and one off; after every request the watchers' ``evicted_pages`` (as they stand, in order), their
``sources``, misses, tombstone and state causes and the trees are compared. Whole runs, replay and timed, give
the same tables, summary, misses and entries. Floors: entries made, entries joined to one already there (a prefix
evicted again, or pages that hash alike) and requests placed in `sources`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cache_helpers import seq
from hypothesis import example, given, settings
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_chunks_property import _trace, tight_vllm_caches
from test_marconi_vllm_watcher_property import Watched, deleted_read
from test_misses_hashed_property import watched_run
from test_misses_run_property import _CHAINS, _PLAIN_8, _SWA_16
from test_page_chunks_property import workloads

from sim.cache import misses, misses_evicted, misses_spans
from sim.run.simulate import SimConfig

_SWITCHES = ("BASE_KEPT",)


@pytest.fixture(autouse=True)
def _an_entry_a_leaf(monkeypatch):
    """The entries held here are those ``misses_spans.PER_REQUEST`` keeps as spans: held with it off."""
    monkeypatch.setattr(misses_spans, "PER_REQUEST", False)


_SEEN = {
    "entries": 0,
    "joined": 0,
    "sources": 0,
}  # the switch-on watchers' entries, and those in a list of several


def _table(watched: Watched):
    watcher = watched.watcher
    return (
        list(watcher.evicted_pages.items()),
        watcher.sources,
        watcher.misses,
        *watched.by_place(watcher.tomb_cause, watcher.state_evicted),
        deleted_read(watcher),
    )


def _count(pages: dict) -> None:
    lists = [v for v in pages.values() if type(v) is list]
    _SEEN["entries"] += len(pages) - len(lists) + sum(map(len, lists))
    _SEEN["joined"] += sum(map(len, lists))


def _compare(cache, requests, monkeypatch, switch: str) -> None:
    seqs: dict = {}  # the requests' tokens by id, as a run's trace gives them (``Trace.request_seq``)
    trace = SimpleNamespace(request_seq=lambda request_id: seqs[request_id])
    ours, theirs = Watched(*cache, True, True, trace), Watched(*cache, True, True, trace)
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        prompt_len, seqs[rid] = shared_len + own_len, tokens
        monkeypatch.setattr(misses_evicted, switch, True)
        done = ours.run(rid, tokens, prompt_len, output_len)
        monkeypatch.setattr(misses_evicted, switch, False)
        assert done == theirs.run(rid, tokens, prompt_len, output_len)
        assert _table(ours) == _table(theirs), f"after {rid}"
        assert snapshot(ours.manager) == snapshot(theirs.manager), f"after {rid}"
    _count(ours.watcher.evicted_pages)
    _SEEN["sources"] += len(ours.watcher.sources)
    monkeypatch.setattr(misses_evicted, switch, True)


@settings(max_examples=60, deadline=None, derandomize=True)
@example(_SWA_16, _CHAINS)
@example(_PLAIN_8, _CHAINS)
def lean_telling_puts_entries_as_the_reference(switch, cache, requests):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _compare(cache, requests, monkeypatch, switch)


@pytest.mark.interpreted
@pytest.mark.parametrize("switch", _SWITCHES)
def test_the_property_puts_and_joins_entries(switch):
    _SEEN.update(entries=0, joined=0, sources=0)
    given(tight_vllm_caches(), workloads())(lean_telling_puts_entries_as_the_reference)(switch)
    assert _SEEN["entries"] > 1000 and _SEEN["joined"] > 100 and _SEEN["sources"] > 50, _SEEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("switch", _SWITCHES)
def test_whole_runs_are_equal_either_way(mode, switch, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, pool_tokens=2400)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(misses_evicted, switch, on)
        runs.append(watched_run(_trace(), config, monkeypatch, misses.MAX_UNHASHED, folded=True))
    (log, ours, watchers), (reference_log, theirs, reference_watchers) = runs
    assert log == reference_log
    assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
    assert ours.summary == theirs.summary
    assert [list(w.evicted_pages.items()) for w in watchers] == [
        list(w.evicted_pages.items()) for w in reference_watchers
    ]
    assert sum(len(w.evicted_pages) for w in watchers) > 100
