"""Marconi's tuner replays do only what their figures read (``marconi_tuner.LEAN_SOLO_RUNS``: ``hit_alone``, no
peak usage or run tuple, and the tuner's trees do not tell their eviction strategy, which keeps nothing, of
releases and stamps); off, ``run_alone`` on trees that tell it, the reference. Held to it: each request's hit and
the cache after it (every node, lock, stamp, count) on generated caches and windows, every alpha's figure, and
whole runs (tables and summary). Floors on the fixed examples: runs that evict, refused runs, distinct figures.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_anonymous_pages import decisions, request_lists
from test_marconi_fork import WINDOW, tuned_caches, tuner_for

from sim.cache.engines import marconi_tuner
from sim.cache.engines.marconi_fork import num_evictions
from sim.cache.engines.marconi_tuner import ALPHAS
from sim.cache.events import Aborted
from sim.cache.sizing import PoolSizes
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from sim.trace.records import Request, Segment

CODE = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "code"}
EVICTING = ((hybrid_model(window=40), CODE, PoolSizes(900, 900, 12)), WINDOW, 1.3)
# pools of 260 tokens: the requests evict, and the longest cannot be held (refused, then aborted)
REFUSING = ((hybrid_model(window=30), {**CODE, "page_size": 2}, PoolSizes(130, 130, 4)), WINDOW[:12], 0.0)
PAPER = ((hybrid_model(swa=False, window=30), {**CODE, "page_size": 16, "marconi_follows": "paper"},
          PoolSizes(40, 40, 6)), WINDOW[:12], 2.0)  # fmt: skip


def _lean(on: bool):
    return mock.patch.object(marconi_tuner, "LEAN_SOLO_RUNS", on)


def _window_alone(configuration, requests, alpha: float, lean: bool) -> tuple[list, dict]:
    """The window run alone, request by request, on a tuner's cache of ``alpha``: each hit and the cache after
    it, and how many runs evicted and were refused."""
    with _lean(lean):
        main, tuner, _ = tuner_for(*configuration, requests)
        cache = tuner.fresh_cache(main, alpha)
        aborted: list = []
        cache.events.subscribe(Aborted, aborted.append)
        seen, counts = [], {"evicting": 0, "refused": 0}
        for request in tuner.history:
            evictions, refusals = num_evictions(cache), len(aborted)
            seen.append((tuner.run(cache, *request), decisions(cache)))
            counts["evicting"] += num_evictions(cache) > evictions
            counts["refused"] += len(aborted) > refusals
        cache.discard()
    return seen, counts


def _figures(configuration, requests, lean: bool) -> dict[float, float]:
    with _lean(lean):
        main, tuner, cost = tuner_for(*configuration, requests)
        return tuner.replay_all(main, cost)


def _same_either_way(configuration, requests, alpha: float) -> dict:
    lean, counts = _window_alone(configuration, requests, alpha, True)
    assert lean == _window_alone(configuration, requests, alpha, False)[0]
    figures = _figures(configuration, requests, True)
    assert figures == _figures(configuration, requests, False)
    return {**counts, "figures": len(set(figures.values()))}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(tuned_caches(), request_lists(12), st.sampled_from(ALPHAS))
@example(*EVICTING)
@example(*REFUSING)
@example(*PAPER)
def test_a_lean_run_leaves_the_same_cache_and_figures(configuration, requests, alpha):
    _same_either_way(configuration, requests, alpha)


@pytest.mark.parametrize(
    ("case", "floors"),
    [
        (EVICTING, {"evicting": 10, "figures": 3}),
        (REFUSING, {"evicting": 4, "refused": 1}),
        (PAPER, {"evicting": 5}),
    ],
)
def test_the_fixed_windows_reach_evictions_refusals_and_distinct_figures(case, floors):
    reached = _same_either_way(*case)
    assert all(reached[name] >= floor for name, floor in floors.items()), reached


def _window_trace() -> Trace:
    """The window twice over, close together: a tuning, then the chosen alpha's evictions."""
    return Trace(
        [
            Request(
                id=f"r{index}",
                arrival=index * 0.05,
                output_len=output_len,
                prompt=[Segment(ref=f"shared{family}", len=shared_len)] * (shared_len > 0)
                + [Segment(ref=f"r{index}", len=own_len)],
            )
            for index, (family, shared_len, own_len, output_len) in enumerate(WINDOW * 2)
        ]
    )


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_whole_runs_are_the_same_run(monkeypatch, mode):
    """A run whose tuner picks alpha, replay and timed: equal tables and summary."""
    config = SimConfig(
        policy="marconi", model="tiny", mode=mode, bounds=False, pool_tokens=900, knobs={"page_size": 1}
    )

    def run(lean: bool) -> tuple:
        monkeypatch.setattr(marconi_tuner, "LEAN_SOLO_RUNS", lean)
        return (), simulate(_window_trace(), config)

    on, _ = same_both_ways(run)
    assert on[1].summary["evictions_full"] > 10
