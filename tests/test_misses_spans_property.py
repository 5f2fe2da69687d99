"""The why watcher's evicted one-page leaves kept a span a request's run of them (``misses_spans.PER_REQUEST``)
against an entry a leaf in ``evicted_pages`` (the reference): the same answers to every question a match asks.

Three sourced ``marconi-vllm`` managers, each watched by its ``TreeMissTracker`` alone, run the same requests on
tight pools (the chunk run's chains, the rules' own evictions, refusals; SWA on and off): spans told at once
(``WATCHER_AS_RUN``), spans told leaf by leaf (``_on_delete_leaf``) and the reference; and a fourth, spans told
at once and indexed by ``by_token`` (``COMPACT`` off: the compact index's reference). After every request their
misses, tombstone and state causes and trees are equal, the two compact span watchers' spans, index and entries
are equal, and every page of every request run so far is asked of all four (``evicted_at`` at each multiple of
the page and a token past it): the same answers. Whole runs, replay and timed, give the same tables, summary and misses.
Floors: leaves put on spans, spans, answers found on a span alone.
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
from test_page_chunks_property import plain, workloads

from sim.cache import misses, misses_spans
from sim.cache.engines import marconi_vllm_run as run_module
from sim.cache.misses_evicted import was_evicted
from sim.run.simulate import SimConfig

_SEEN = {"leaves": 0, "spans": 0, "found": 0, "on_spans": 0}


def _run(watched: Watched, spans: bool, as_run: bool, request, monkeypatch, compact: bool = True):
    monkeypatch.setattr(misses_spans, "PER_REQUEST", spans)
    monkeypatch.setattr(misses_spans, "COMPACT", compact)
    monkeypatch.setattr(run_module, "WATCHER_AS_RUN", as_run)
    return watched.run(*request)


def _asked(watched: Watched, seqs: dict, compact: bool, monkeypatch) -> list[bool]:
    """``_answers`` read as the watcher's index was made (``COMPACT``)."""
    monkeypatch.setattr(misses_spans, "COMPACT", compact)
    return _answers(watched, seqs)


def _answers(watched: Watched, seqs: dict) -> list[bool]:
    """``evicted_at`` of every request's tokens at each page's start and a token past it."""
    watcher, page = watched.watcher, watched.manager.tree.page_size
    answers = []
    for tokens in seqs.values():
        for depth in range(0, len(tokens) + 1, page):
            answers += [watcher.evicted_at(tokens, depth), watcher.evicted_at(tokens, depth + 1)]
    return answers


def _on_spans(watched: Watched, seqs: dict) -> int:
    """How many pages the spans alone answer for (no entry of ``evicted_pages`` does)."""
    watcher, page = watched.watcher, watched.manager.tree.page_size
    found = 0
    for tokens in seqs.values():
        for depth in range(0, len(tokens) + 1, page):
            entry = was_evicted(
                watcher.evicted_pages, tokens, depth, page, watcher.request_seq, watcher.sources
            )
            found += watcher.evicted_at(tokens, depth) and not entry
    return found


def _tables(watched: Watched):
    watcher = watched.watcher
    return (
        watcher.misses,
        *watched.by_place(watcher.tomb_cause, watcher.state_evicted),
        deleted_read(watcher),
    )


def _spans(watched: Watched):
    watcher, spans = watched.watcher, watched.watcher.spans
    pages = {key: plain(value) for key, value in watcher.evicted_pages.items()}
    return spans.spans, spans.num_indexed, spans.by_token, spans.heads, spans.segments, pages, watcher.sources


def _leaves_and_spans(spans, page: int) -> tuple[int, int]:
    """How many leaves and spans the compact index holds: a span's segments share its place and start, and a
    segment holds the span's leaves starting in ``[low, high)``."""
    segments, leaves, starts = spans.segments, 0, set()
    for at in range(0, len(segments), 5):
        place, low, high, start = segments[at : at + 4]
        leaves += -((start - high) // page) + (start - low) // page
        starts.add((place, start))
    return leaves, len(starts)


def _compare(cache, requests, monkeypatch) -> None:
    seqs: dict = {}  # the requests' tokens by id, as a run's trace gives them (``Trace.request_seq``)
    trace = SimpleNamespace(request_seq=lambda request_id: seqs[request_id])
    ours, told, theirs, listed = (Watched(*cache, True, True, trace) for _ in range(4))
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        seqs[rid] = tokens
        request = (rid, tokens, shared_len + own_len, output_len)
        done = _run(ours, True, True, request, monkeypatch)
        assert done == _run(told, True, False, request, monkeypatch)
        assert done == _run(theirs, False, True, request, monkeypatch)
        assert done == _run(listed, True, True, request, monkeypatch, compact=False)
        assert _tables(ours) == _tables(told) == _tables(theirs) == _tables(listed), f"after {rid}"
        assert snapshot(ours.manager) == snapshot(theirs.manager), f"after {rid}"
        monkeypatch.setattr(misses_spans, "PER_REQUEST", True)  # the reads (``in_spans``) do not read it
        monkeypatch.setattr(misses_spans, "COMPACT", True)  # they read this one: each watcher's own
        _SEEN["on_spans"] += _on_spans(ours, seqs)
        answers = _answers(ours, seqs)
        assert answers == _answers(told, seqs) == _answers(theirs, seqs), f"after {rid}"
        assert answers == _asked(listed, seqs, False, monkeypatch), f"after {rid}"
        assert _spans(ours) == _spans(told), f"after {rid}"
    misses_spans.index_compact(ours.watcher.spans, trace.request_seq, ours.watcher.sources)
    leaves, spans = _leaves_and_spans(ours.watcher.spans, cache[2]["page_size"])
    _SEEN["spans"] += spans
    _SEEN["leaves"] += leaves
    _SEEN["found"] += sum(miss.next_page_evicted for miss in ours.watcher.misses.values())


@settings(max_examples=60, deadline=None, derandomize=True)
@example(_SWA_16, _CHAINS)
@example(_PLAIN_8, _CHAINS)
@given(tight_vllm_caches(), workloads())
def test_spans_answer_as_an_entry_a_leaf(cache, requests):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _compare(cache, requests, monkeypatch)


test_spans_answer_as_an_entry_a_leaf.__test__ = False  # run once, inside the floor's test


@pytest.mark.interpreted
def test_the_property_puts_leaves_on_spans_and_finds_them():
    _SEEN.update(leaves=0, spans=0, found=0, on_spans=0)
    test_spans_answer_as_an_entry_a_leaf()
    assert _SEEN["leaves"] > 1000 and _SEEN["spans"] > 50 and _SEEN["on_spans"] > 50, _SEEN


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_equal_either_way(mode, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, pool_tokens=2400)
    runs = []
    for on, compact in ((True, True), (False, True), (True, False)):
        monkeypatch.setattr(misses_spans, "PER_REQUEST", on)
        monkeypatch.setattr(misses_spans, "COMPACT", compact)
        runs.append(watched_run(_trace(), config, monkeypatch, misses.MAX_UNHASHED, folded=True))
    (log, ours, watchers), *others = runs
    for reference_log, theirs, _ in others:
        assert log == reference_log
        assert ours.requests.equals(theirs.requests) and ours.steps.equals(theirs.steps)
        assert ours.summary == theirs.summary
    assert sum(len(w.spans.spans) + len(w.spans.segments) // 5 for w in watchers) > 30
