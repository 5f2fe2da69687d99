"""Marconi's tuner runs the requests before its window's first eviction once and forks the cache for each
alpha (``AlphaTuner.replay_all``, ``marconi_fork.py``); ``AlphaTuner.replay`` (each alpha from scratch) is the
reference. Held to it: every alpha's figure and the chosen alpha on generated windows, and a fork's cache,
request by request, against the cache it was copied from.
"""

from __future__ import annotations

from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_anonymous_pages import decisions, request_lists, run_request

from sim.cache.engines.marconi_fork import could_evict, fork, num_evictions
from sim.cache.engines.marconi_tuner import ALPHAS, AlphaTuner
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy


@st.composite
def tuned_caches(draw, max_pool_units: int = 200, max_states: int = 40):
    """A model, Marconi's knobs (alpha left to the tuner) and pools from a few requests' worth to a dozen's
    (``max_pool_units`` x 16 tokens a pool at most, ``max_states`` states)."""
    page = draw(st.sampled_from([1, 1, 2, 16]))
    knobs = dict(
        page_size=page,
        chunked_prefill_size=page * draw(st.integers(1, 6)),
        marconi_follows=draw(st.sampled_from(["paper", "code"])),
    )
    model = hybrid_model(swa=draw(st.booleans()), mamba=draw(st.booleans()), window=draw(st.integers(17, 90)))
    tokens_per_pool = draw(st.integers(6, max_pool_units)) * 16
    sizes = PoolSizes(
        -(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(3, max_states))
    )
    return model, knobs, sizes


def tuner_for(model, knobs: dict, sizes: PoolSizes, requests) -> tuple:
    """The main cache, its tuner holding ``requests`` as its window, and the cost model the tuner scores with."""
    main = make_manager(model, make_policy("marconi", **knobs), sizes)
    tuner = AlphaTuner(main.policy)
    for index, (family, shared_len, own_len, output_len) in enumerate(requests):
        tokens = seq((f"shared{family}", shared_len), (f"r{index}", own_len), (f"out-r{index}", output_len))
        tuner.history.append((f"r{index}", tokens, shared_len + own_len))
    return main, tuner, main.rules.cost(main)


def figures_both_ways(switched, configuration: tuple, requests) -> list[dict]:
    """The tuner's figures for every alpha over ``requests``, with ``switched(True)`` and then ``switched(False)``
    in force (a fast path's module flag and its reference)."""
    figures = []
    for on in (True, False):
        with switched(on):
            main, tuner, cost = tuner_for(*configuration, requests)
            figures.append(tuner.replay_all(main, cost))
    return figures


@settings(max_examples=40, deadline=None, derandomize=True)
@given(tuned_caches(), request_lists(12))
def test_forked_replays_score_every_alpha_as_replays_from_scratch(configuration, requests):
    main, tuner, cost = tuner_for(*configuration, requests)
    figures = tuner.replay_all(main, cost)
    assert figures == {alpha: tuner.replay(main, cost, alpha) for alpha in ALPHAS}
    assert list(figures) == list(ALPHAS)


WINDOW = [
    (2, 200, 57, 43),
    (1, 100, 67, 43),
    (1, 100, 28, 36),
    (1, 200, 17, 29),
    (1, 0, 80, 55),
    (1, 0, 77, 54),
]
WINDOW += [
    (3, 300, 45, 52),
    (2, 200, 69, 33),
    (3, 200, 120, 42),
    (2, 0, 98, 54),
    (2, 300, 44, 30),
    (3, 100, 85, 14),
]
WINDOW += [(1, 200, 74, 25), (3, 200, 81, 27), (1, 300, 150, 17), (1, 100, 103, 10), (0, 300, 128, 26)]
WINDOW += [(0, 300, 21, 16), (1, 300, 123, 42), (2, 100, 115, 49)]


def test_a_window_where_the_alphas_differ():
    """The property above where a shared head runs before the first eviction, the forks evict, and the
    figures differ between alphas (so the choice is not the default's tie)."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "code"}
    main, tuner, cost = tuner_for(hybrid_model(window=40), knobs, PoolSizes(900, 900, 12), WINDOW)
    reference = {alpha: tuner.replay(main, cost, alpha) for alpha in ALPHAS}
    assert tuner.replay_all(main, cost) == reference
    assert len(set(reference.values())) == 3
    shared, head = tuner.fresh_cache(main, ALPHAS[-1]), 0
    while not could_evict(shared, len(tuner.history[head][1])):
        tuner.run(shared, *tuner.history[head])
        head += 1
    assert head >= 2 and num_evictions(shared) == 0


@settings(max_examples=100, deadline=None, derandomize=True)
@given(tuned_caches(), request_lists(8), request_lists(8), st.sampled_from(ALPHAS))
def test_a_fork_decides_as_the_cache_it_copies(configuration, head, tail, alpha):
    """Fork after ``head`` and run ``tail`` on both: the same hits and decisions after every request."""
    main, tuner, _ = tuner_for(*configuration, [])
    chunk = configuration[1]["chunked_prefill_size"]
    shared = tuner.fresh_cache(main, alpha)
    for index, request in enumerate(head):
        run_request(shared, index, request, chunk)
    copy = fork(shared, tuner.fresh_cache(main, alpha))
    assert decisions(copy) == decisions(shared)
    for index, request in enumerate(tail, start=len(head)):
        assert run_request(copy, index, request, chunk) == run_request(shared, index, request, chunk)
        assert decisions(copy) == decisions(shared), f"after r{index}"
