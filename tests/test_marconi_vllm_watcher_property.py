"""vLLM+'s direct eviction tells the miss watcher one ``LeafEvicted`` instead of its four events
(``marconi_vllm_direct.told_as_one``) where the watcher hears them alone; the watcher ends where the four
events leave it.

Two ``marconi-vllm`` managers, ``fused_chunks`` on and off, each watched by a ``TreeMissTracker`` and nothing
else (so the fused one takes the one event), run the same requests on tight pools (pages 1 to 64, SWA on and
off); after every request the watchers' tables are compared whole (node ids by position: the two trees' ids
differ), with the trees' ``snapshot``.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import snapshot
from test_marconi_vllm_chunks_property import tight_vllm_caches
from test_page_chunks_property import plain, workloads

from sim.cache import misses_evicted
from sim.cache.engines import marconi_vllm_chunks as chunks
from sim.cache.errors import ReplayRefused
from sim.cache.solo_run import run_alone
from sim.engines.registry import make_manager, make_policy

_TOLD = {"as_one": 0}


def deleted_read(watcher):
    """The watcher's last deleted node as its handlers read it: a live node by place; a dead one or none alike
    (no event names a dead node again; vLLM+'s chain leaves none where its victims live on as new leaves,
    ``marconi_vllm_chain_pass.REUSES_VICTIMS``)."""
    deleted = watcher._deleted
    return "dead or none" if deleted is None or not deleted.alive else plain(deleted)


class Watched:
    """A manager whose only observer is its miss watcher."""

    def __init__(self, preset, model, knobs, sizes, fused: bool, one_loop: bool, trace=None):
        self.manager = make_manager(model, make_policy(preset, **knobs), sizes)
        self.manager.rules.fused_chunks = fused
        if not one_loop:
            self.manager.rules.takes_page_chunks = lambda manager: False
        self.watcher = self.manager.watch_misses(trace)  # ``trace``: its ``request_seq`` only
        self.chunk, self.iteration = knobs["chunked_prefill_size"], 0

    def run(self, request_id, tokens, prompt_len, output_len):
        try:
            run = run_alone(
                self.manager, request_id, tokens, prompt_len, output_len, self.chunk, self.iteration
            )
        except ReplayRefused as refused:
            if request_id in self.manager.requests:
                self.manager.abort(request_id)
            return str(refused)
        self.iteration = run.end_iteration
        return run.end_iteration, run.inserted_len

    def by_place(self, *tables) -> list:
        """Each of ``tables`` (keyed by nodes) sorted, its nodes as their positions (a dead node: "gone")."""
        where = {node: (node.start, node.end) for node in self.manager.tree.nodes()}
        return [
            sorted((where.get(key, ("gone",)), plain(value)) for key, value in table.items())
            for table in tables
        ]

    def tables(self):
        """The watcher's state, its nodes as their positions."""
        watcher = self.watcher
        return (
            watcher.misses,
            {key: plain(value) for key, value in watcher.evicted_pages.items()},
            *self.by_place(watcher.tomb_cause, watcher.state_evicted, watcher._prefix_links),
            watcher._swa_eviction_pending,
            watcher._in_finish,
            deleted_read(watcher),
        )


def _compare(cache, requests, one_loop: bool) -> None:
    # the general path's leaves know no source: both keep ints (sourced entries: test_misses_sourced_property.py)
    with mock.patch.object(misses_evicted, "SOURCED", False):
        _compare_unsourced(cache, requests, one_loop)


def _compare_unsourced(cache, requests, one_loop: bool) -> None:
    fused, general = Watched(*cache, True, one_loop), Watched(*cache, False, one_loop)
    for index, (family, shared_len, own, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        own_ref = rid if own == 3 else f"own{family}-{own}"
        tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
        prompt_len = shared_len + own_len
        assert fused.run(rid, tokens, prompt_len, output_len) == general.run(
            rid, tokens, prompt_len, output_len
        )
        assert snapshot(fused.manager) == snapshot(general.manager), f"after {rid}"
        assert fused.tables() == general.tables(), f"after {rid}"


@pytest.mark.interpreted
@settings(max_examples=120, deadline=None, derandomize=True)
@given(tight_vllm_caches(), workloads(), st.booleans())
def test_one_event_leaves_the_watcher_as_four(cache, requests, one_loop):
    _compare(cache, requests, one_loop)


# the property runs once, inside test_the_property_tells_the_watcher_as_one (which also asserts what its examples reach):
# collected on its own too, it ran its examples twice
test_one_event_leaves_the_watcher_as_four.__test__ = False


@pytest.mark.interpreted
def test_the_property_tells_the_watcher_as_one(monkeypatch):
    """The runs above do tell the watcher one event per direct eviction, many times."""
    told_as_one = chunks.told_as_one

    def counted(tree, events):
        told = told_as_one(tree, events)
        _TOLD["as_one"] += told is not None
        return told

    _TOLD["as_one"] = 0
    monkeypatch.setattr(chunks, "told_as_one", counted)
    test_one_event_leaves_the_watcher_as_four()
    assert _TOLD["as_one"] > 1000, _TOLD
