"""Marconi's tuner runs each request of its window alone through the fused ``marconi_solo.solo_hit`` (switch
``FUSED_SOLO``); off, through ``solo_run.run_alone``, the reference. Held to it: two caches, one each way, run the
same requests alone on tight pools (pages, SWA and MAMBA, pools apart or one byte budget) and after every
request their hits, trees (spans, page counts, states, FULL and state locks, SWA holders, recency), unlocked
token counts, pool counts and eviction counts are equal; the tuner's 21 figures and the chosen alpha on
generated windows and on a window whose alphas differ; whole runs, replay and timed, equal either way.
"""

from __future__ import annotations

from unittest import mock

from cache_helpers import hybrid_model
from hypothesis import given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_anonymous_pages import decisions, request_lists
from test_marconi_anonymous_ids import marconi_cases
from test_marconi_fork import WINDOW, figures_both_ways, tuned_caches, tuner_for

from sim.cache.byte_budget import unit_bytes
from sim.cache.engines import marconi_solo
from sim.cache.engines.marconi_tuner import ALPHAS, AlphaTuner
from sim.cache.sizing import PoolSizes
from sim.run.simulate import simulate


def _switched(on: bool):
    return mock.patch.object(marconi_solo, "FUSED_SOLO", on)


@st.composite
def solo_caches(draw):
    """A model, Marconi's knobs and tight pools (a few requests' worth), apart or one byte budget."""
    model, knobs, sizes = draw(tuned_caches(max_pool_units=60, max_states=30))
    if draw(st.integers(0, 3)) == 0:
        page = knobs["page_size"]
        units = unit_bytes(model, page)
        budget = sizes.full_pages * (units[0] + units[1]) + draw(st.integers(3, 8)) * units[2]
        sizes = PoolSizes(10**6, 10**6, 10**6, budget_bytes=budget, unit_bytes=units)
    return model, knobs, sizes


def snapshot(manager) -> tuple:
    """``decisions`` and what it leaves out that a lock touches: each node's SWA holders, the unlocked count."""
    holders = tuple(tuple(sorted(n.swa_holders)) for n in manager.tree.nodes())
    return decisions(manager), holders, manager.tree.num_unlocked_tokens, tuple(manager.requests)


def run_both_ways(tuner: AlphaTuner, caches: list, request: tuple) -> list[int]:
    """The request run alone on ``caches[0]`` fused and on ``caches[1]`` by ``run_alone``: the two hits."""
    hits = []
    for cache, on in zip(caches, (True, False), strict=True):
        with _switched(on):
            hits.append(tuner.run(cache, *request))
    return hits


@settings(max_examples=200, deadline=None, derandomize=True)
@given(solo_caches(), request_lists(12), st.sampled_from([0.0, 0.4, 1.3, 2.0]))
def test_caches_run_alone_fused_decide_as_run_alone(configuration, requests, alpha):
    main, tuner, _ = tuner_for(*configuration, requests)
    caches = [tuner.fresh_cache(main, alpha) for _ in range(2)]
    for request in tuner.history:
        hits = run_both_ways(tuner, caches, request)
        assert hits[0] == hits[1]
        assert snapshot(caches[0]) == snapshot(caches[1])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(solo_caches(), request_lists(12))
def test_the_tuner_scores_and_chooses_alike(configuration, requests):
    fused, reference = figures_both_ways(_switched, configuration, requests)
    assert fused == reference
    assert max(fused, key=fused.__getitem__) == max(reference, key=reference.__getitem__)


def test_a_window_where_the_alphas_differ():
    """The fork test's window: the forks evict and three figures differ, so the choice is not a tie."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "code"}
    configuration = (hybrid_model(window=40), knobs, PoolSizes(900, 900, 12))
    fused, reference = figures_both_ways(_switched, configuration, WINDOW)
    assert fused == reference and len(set(fused.values())) == 3
    assert list(fused) == list(ALPHAS)


def test_a_tight_window_refuses_and_evicts_alike():
    """Requests the pools cannot hold (refused mid-prefill and at admission) among ones that evict."""
    requests = [(family % 3, 40 * (family % 4), 60 + 7 * family, 30 + family) for family in range(14)]
    requests += [(1, 0, 400, 20), (2, 100, 350, 90), (0, 40, 30, 10)]
    for page in (1, 16):
        knobs = {"page_size": page, "chunked_prefill_size": 2 * page}
        configuration = (hybrid_model(window=40), knobs, PoolSizes(320 // page, 320 // page, 5))
        main, tuner, _ = tuner_for(*configuration, requests)
        caches = [tuner.fresh_cache(main, 1.3) for _ in range(2)]
        hits = [run_both_ways(tuner, caches, request) for request in tuner.history]
        assert all(fused == reference for fused, reference in hits)
        assert snapshot(caches[0]) == snapshot(caches[1])
        assert sum(caches[0].tree.num_evictions.values()) > 5 and hits.count([0, 0]) >= 1


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
