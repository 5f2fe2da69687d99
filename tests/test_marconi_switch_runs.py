"""Marconi's pick switches, each against its reference with the tuner and whole runs around it:
``marconi_evict.ZERO_ALPHA_BY_RECENCY`` (alpha 0 by the first lowest raw recency), ``SCORED_WALK`` (alpha != 0
scored in the walk) and ``KEEP_CANDIDATES`` (a reserve's later picks from its kept candidates). Their picks are
held to the reference pick by pick in their own files; here the tuner's 21 figures and whole runs, replay and
timed, come out the same with each switch on and off.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import hybrid_model
from hypothesis import given, settings
from same_runs import same_both_ways
from test_anonymous_pages import request_lists
from test_marconi_fork import WINDOW, figures_both_ways, tuned_caches
from test_marconi_zero_alpha_property import _window_trace

from sim.cache.engines import marconi_evict
from sim.cache.sizing import PoolSizes
from sim.run.simulate import SimConfig, simulate

# each switch: the alpha a whole run fixes beside the tuned one, and the Marconi rule its runs follow (None: the
# default)
SWITCHES = {
    "ZERO_ALPHA_BY_RECENCY": (0.0, None),
    "SCORED_WALK": (1.3, "paper"),
    "KEEP_CANDIDATES": (1.3, "paper"),
}


def _switch(name: str):
    return lambda on: mock.patch.object(marconi_evict, name, on)


@pytest.mark.parametrize("name", list(SWITCHES))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(tuned_caches(), request_lists(12))
def test_the_tuners_figures_are_equal(name, configuration, requests):
    figures = figures_both_ways(_switch(name), configuration, requests)
    assert figures[0] == figures[1]


@pytest.mark.parametrize("name", ["SCORED_WALK", "KEEP_CANDIDATES"])
def test_a_window_where_the_alphas_differ(name):
    """The fork test's window (the paper's figure): its 21 figures equal either way, and not all alike."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "paper"}
    configuration = (hybrid_model(window=40), knobs, PoolSizes(900, 900, 12))
    figures = figures_both_ways(_switch(name), configuration, WINDOW)
    assert figures[0] == figures[1] and len(set(figures[0].values())) > 1, figures[0]


@pytest.mark.parametrize("name", list(SWITCHES))
@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("tuned", [True, False])
def test_whole_runs_are_the_same_run(monkeypatch, name, mode, tuned):
    """A run whose tuner picks alpha (or the switch's alpha fixed), replay and timed: equal tables and summary."""
    alpha, follows = SWITCHES[name]
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_alpha": None if tuned else alpha}
    if follows is not None:
        knobs["marconi_follows"] = follows
    config = SimConfig(policy="marconi", model="tiny", mode=mode, bounds=False, pool_tokens=900, knobs=knobs)

    def run(on: bool) -> tuple:
        monkeypatch.setattr(marconi_evict, name, on)
        return (), simulate(_window_trace(), config)

    on, _ = same_both_ways(run)
    assert on[1].summary["evictions_full"] > 10
