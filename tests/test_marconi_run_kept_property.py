"""A fused solo run's reserves share one ``KeptCandidates`` until an insert moves the tree (switch
``marconi_solo.KEPT_IN_RUN``); off, each reserve keeps its own (the reference). Held: at every pick that reads
kept candidates they, their efficiencies and the victim are a fresh walk's; two tuner caches, one each way, run
the same requests alone and after every request their hits and trees, locks, pools and counts are equal; the
tuner's 21 figures and the chosen alpha on generated windows and budgets; whole runs equal either way.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_anonymous_pages import request_lists
from test_marconi_anonymous_ids import marconi_cases
from test_marconi_fork import WINDOW, figures_both_ways, tuner_for
from test_marconi_kept_candidates_property import MANY_LEAVES, _checked_pick
from test_marconi_solo_property import snapshot, solo_caches

from sim.cache.engines import marconi_solo
from sim.cache.engines.marconi_evict import MarconiEvictor
from sim.cache.engines.marconi_tuner import AlphaTuner
from sim.cache.sizing import PoolSizes
from sim.run.simulate import simulate

NUM_CARRIED: list[int] = []  # reserves that began on the run's last reserve's candidates


def _switched(on: bool):
    return mock.patch.object(marconi_solo, "KEPT_IN_RUN", on)


def _counted_reserve(real):
    """``reserve`` that counts the reserves that evict and begin on the run's last reserve's candidates."""

    def reserve(evictor: MarconiEvictor, manager, full_pages: int, swa_pages: int, states: int):
        carried = evictor.run_kept is not None and evictor.run_kept.current
        evicted = sum(manager.tree.num_evictions.values())
        refusal = real(evictor, manager, full_pages, swa_pages, states)
        if carried and sum(manager.tree.num_evictions.values()) > evicted:
            NUM_CARRIED.append(1)
        return refusal

    return reserve


_PAGE_1 = {"page_size": 1, "chunked_prefill_size": 32}
FIXED = [  # long prompts in small chunks over many small leaves: a run's reserves evict one after another
    ((hybrid_model(window=40), _PAGE_1, PoolSizes(260, 260, 40)), MANY_LEAVES, 1.3),
    ((hybrid_model(swa=False), _PAGE_1, PoolSizes(260, 260, 40)), MANY_LEAVES, 0.4),
    (
        (hybrid_model(mamba=False, window=30), {**_PAGE_1, "page_size": 2}, PoolSizes(150, 150, 4)),
        MANY_LEAVES,
        2.0,
    ),
]


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(solo_caches(), request_lists(12), st.sampled_from([0.4, 1.3, 2.0]))
@example(*FIXED[0])
@example(*FIXED[1])
@example(*FIXED[2])
def test_runs_pick_from_the_walks_candidates_and_decide_alike(configuration, requests, alpha):
    main, tuner, _ = tuner_for(*configuration, requests)
    caches = [tuner.fresh_cache(main, alpha) for _ in range(2)]
    checked = _checked_pick(MarconiEvictor.pick)
    counted = _counted_reserve(MarconiEvictor.reserve)
    with (
        mock.patch.object(MarconiEvictor, "pick", checked),
        mock.patch.object(MarconiEvictor, "reserve", counted),
    ):
        for request in tuner.history:
            hits = []
            for cache, on in zip(caches, (True, False), strict=True):
                with _switched(on):
                    hits.append(tuner.run(cache, *request))
            assert hits[0] == hits[1]
            assert snapshot(caches[0]) == snapshot(caches[1])


@pytest.mark.interpreted
def test_the_fixed_examples_carry_candidates_across_reserves():
    """A floor on the fixed examples alone (each carried pick held to a fresh walk)."""
    NUM_CARRIED.clear()
    for drawn in FIXED:
        test_runs_pick_from_the_walks_candidates_and_decide_alike.hypothesis.inner_test(*drawn)
    assert len(NUM_CARRIED) >= 20, len(NUM_CARRIED)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(solo_caches(), request_lists(12))
def test_the_tuner_scores_and_chooses_alike(configuration, requests):
    kept, reference = figures_both_ways(_switched, configuration, requests)
    assert kept == reference
    assert max(kept, key=kept.__getitem__) == max(reference, key=reference.__getitem__)


def test_a_window_where_the_alphas_differ():
    """The fork test's window, in small chunks: the forks evict and the figures take several values."""
    for chunk in (8, 64):
        knobs = {"page_size": 1, "chunked_prefill_size": chunk, "marconi_follows": "code"}
        configuration = (hybrid_model(window=40), knobs, PoolSizes(900, 900, 12))
        kept, reference = figures_both_ways(_switched, configuration, WINDOW)
        assert kept == reference and len(set(kept.values())) >= 3


@settings(max_examples=25, deadline=None, derandomize=True)
@given(marconi_cases())
def test_whole_runs_equal_either_way(case):
    trace, config = case

    def run(on: bool) -> tuple:
        figures: list = []
        original = AlphaTuner.replay_all

        def watched(self, manager, cost):
            figures.append(original(self, manager, cost))
            return figures[-1]

        with _switched(on), mock.patch.object(AlphaTuner, "replay_all", watched):
            return figures, simulate(trace, config)

    same_both_ways(run)
