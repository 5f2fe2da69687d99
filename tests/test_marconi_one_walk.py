"""Marconi's FLOP-aware pick scores its candidates in the walk that finds them (``marconi_walk.ONE_WALK``);
``scan`` then ``_best`` is the reference. As a property over generated runs (Marconi's presets and models as
tests/test_marconi_anonymous_ids.py draws them: tight pools and few states, so that leaves and states are
evicted and the alpha tuner forks its 21 replays; pools apart or one byte budget; replay and timed): the run's
tables and summary, every allocation, every tree as the run throws it away (the tuner's too: its replays
evict with alpha up to 2) and the tuner's figures per alpha equal the reference's. The victim-by-victim check,
every alpha and every component after every request, is tests/test_marconi_evict_scan.py's (``pick`` against
``pick_by_scan``). Fixed cases (the ``@example``s) hold floors on the fast path's use in this test's own runs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from cache_helpers import hybrid_model
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from test_marconi_fork import WINDOW, tuner_for

from sim.cache.engines import marconi_evict, marconi_walk
from sim.cache.engines.marconi_tuner import ALPHAS, AlphaTuner
from sim.cache.sizing import PoolSizes
from sim.trace.generate import fanout
from tests.anonymous_runs import run_logged
from tests.test_marconi_anonymous_ids import FIXED_CASES, _config, marconi_cases

REPLAY_ALL = AlphaTuner.replay_all


def run_with_switch(trace, config, one_walk: bool, monkeypatch) -> tuple[list, object, list, list]:
    """The run's log and result (``run_logged``), the tuner's figures, and the candidates of every pick the
    fast path made."""
    tuned: list = []
    walks: list = []
    walk = marconi_walk.candidate_terms

    def logged_replay_all(tuner, manager, cost):
        tuned.append(REPLAY_ALL(tuner, manager, cost))
        return tuned[-1]

    def counted_walk(*args):
        found = walk(*args)
        walks.append(len(found[0]))
        return found

    monkeypatch.setattr(marconi_walk, "ONE_WALK", one_walk)
    monkeypatch.setattr(marconi_evict, "candidate_terms", counted_walk)
    monkeypatch.setattr(AlphaTuner, "replay_all", logged_replay_all)
    log, _, result = run_logged(trace, config, True, monkeypatch)
    return log, result, tuned, walks


def assert_runs_equal(trace, config, monkeypatch) -> tuple[list, list]:
    """The runs with the switch on and off equal; returns the fast run's tuner figures and picks' candidates."""
    fast_log, fast, fast_tuned, walks = run_with_switch(trace, config, True, monkeypatch)
    log, reference, tuned, reference_walks = run_with_switch(trace, config, False, monkeypatch)
    assert not reference_walks, "the switch off takes scan and _best"
    assert fast_log == log
    assert fast.requests.equals(reference.requests)
    assert fast.steps.equals(reference.steps)
    assert fast.summary == reference.summary
    assert fast_tuned == tuned
    return fast_tuned, walks


@st.composite
def flop_aware_cases(draw):
    """``marconi_cases`` on Marconi itself (SGLang+'s LRU never scores), alpha tuned or fixed (with alpha 0
    until the tuner's choice, the run's own picks read only recency)."""
    trace, config = draw(marconi_cases())
    alpha = draw(st.sampled_from([None, None, 0.5, 2.0]))
    return trace, replace(config, policy="marconi", knobs={**config.knobs, "marconi_alpha": alpha})


def _with_alpha(config, alpha: float):
    return replace(config, knobs={**config.knobs, "marconi_alpha": alpha})


# (trace, config, floors: picks by the walk, picks among three or more candidates, the most candidates)
WALK_CASES = [
    (FIXED_CASES[2][0], FIXED_CASES[2][1], (150, 50, 3)),  # tunes alpha on 21 forked replays
    (FIXED_CASES[3][0], FIXED_CASES[3][1], (10, 1, 3)),  # timed
    (
        fanout(num_groups=4, prompts_per_group=6, system_len=400, question_len=50, output_len=80, seed=3),
        _with_alpha(_config("marconi", "qwen3-next", 2_500), 1.0),
        (15, 15, 8),
    ),
]


@pytest.mark.interpreted  # patches module functions and flags the compiled core binds
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=flop_aware_cases())
@example(case=WALK_CASES[0][:2])
@example(case=WALK_CASES[1][:2])
@example(case=WALK_CASES[2][:2])
def test_one_walk_runs_equal_scan_then_best(case, monkeypatch):
    trace, config = case
    try:
        assert_runs_equal(trace, config, monkeypatch)
    except ValueError:  # a configuration Marconi refuses (a budget too small for one request, ...)
        reject()


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", WALK_CASES)
def test_the_fixed_runs_pick_by_the_walk(trace, config, floors, monkeypatch):
    """The fixed examples pick their victims by the walk, many of them among several candidates."""
    _, walks = assert_runs_equal(trace, config, monkeypatch)
    num_picks, num_choices, most = floors
    assert len(walks) >= num_picks and sum(n >= 3 for n in walks) >= num_choices and max(walks) >= most


def test_the_tuner_scores_every_alpha_alike_with_the_walk_and_without(monkeypatch):
    """tests/test_marconi_fork.py's window where the alphas' figures differ: every alpha's replay (forked, and
    from scratch) gives the same figure with the switch on and off."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64, "marconi_follows": "code"}
    main, tuner, cost = tuner_for(hybrid_model(window=40), knobs, PoolSizes(900, 900, 12), WINDOW)
    figures = tuner.replay_all(main, cost)
    assert figures == {alpha: tuner.replay(main, cost, alpha) for alpha in ALPHAS}
    assert len(set(figures.values())) > 1
    monkeypatch.setattr(marconi_walk, "ONE_WALK", False)
    assert tuner.replay_all(main, cost) == figures
