"""``repeats``' shared runs (``SHARED_RUNS``) against the reference, fresh lists: a run's items and length are
the same either way (a tuple kept per length, or a list made each time; past ``MAX_SHARED_LEN`` a list).
Where both KV pools are anonymous, ``StepPlans.add_new_pages`` counts the pages out and extends the request's
lists from those runs, and ``RequestCache.free_own_swa_below`` fills its freed SWA entries from them. As a
property over the generated FreeToken runs (``test_freetoken_page_lists.page_cases``: three presets, three
models, pages 1, 2, 16 and 64, small pools, bounds on and off; replay and timed) and Marconi's
(``test_marconi_anonymous_ids.marconi_cases``, whose tuner forks anonymous caches), on anonymous pools: every
allocation (pool, free count before it, count), every tree's nodes with their FULL and SWA page lists (the
None entries where SWA was freed included), free counts and eviction counts as the run ends, and the run's
tables and summary equal with the switch on and off. Fixed cases hold floors on the shared path's use, counted
in the test's own run.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from anonymous_runs import run_switched
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_freetoken_anonymous_replay import FIXED_CASES
from test_freetoken_page_lists import page_cases
from test_marconi_anonymous_ids import FIXED_CASES as MARCONI_CASES
from test_marconi_anonymous_ids import marconi_cases

import sim.cache.repeats as repeats
import sim.cache.request as request_module
from sim.cache.pools import ANONYMOUS_ID

SHARED_ANONYMOUS_IDS, SHARED_NONES = repeats.anonymous_ids, repeats.nones


@pytest.mark.interpreted  # sets the module's switch, which the compiled core binds
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(0, repeats.MAX_SHARED_LEN + 3), shared=st.booleans())
@example(count=0, shared=True)
@example(count=1, shared=True)
@example(count=repeats.MAX_SHARED_LEN, shared=True)
@example(count=repeats.MAX_SHARED_LEN + 1, shared=True)
def test_a_run_holds_its_item_count_times(count, shared, monkeypatch):
    monkeypatch.setattr(repeats, "SHARED_RUNS", shared)
    # fresh runs: the module's own may have spent their budget on whatever ran before in this process
    monkeypatch.setattr(repeats, "ANONYMOUS_RUNS", repeats.KeptRuns(ANONYMOUS_ID))
    monkeypatch.setattr(repeats, "NONE_RUNS", repeats.KeptRuns(None))
    ids, none_run = repeats.anonymous_ids(count), repeats.nones(count)
    assert list(ids) == [ANONYMOUS_ID] * count and list(none_run) == [None] * count
    kept = shared and count <= repeats.MAX_SHARED_LEN
    assert isinstance(ids, tuple) == kept and isinstance(none_run, tuple) == kept
    if kept:  # the length's run is made once
        assert repeats.anonymous_ids(count) is ids and repeats.nones(count) is none_run


def run_logged(trace, config, shared: bool, monkeypatch) -> tuple[list, object, list]:
    """``anonymous_runs.run_switched`` with the switch set to ``shared`` (page lists logged as lists); the
    lengths the request's lists took shared runs of (extends, None fills: empty with the switch off)."""
    runs_used: list = []

    def counted(run, kind):
        def run_of(count):
            runs_used.append((kind, count))
            return run(count)

        return run_of

    switches = {
        (repeats, "SHARED_RUNS"): shared,
        (request_module, "anonymous_ids"): counted(SHARED_ANONYMOUS_IDS, "ids"),
        (request_module, "nones"): counted(SHARED_NONES, "nones"),
    }
    log, result = run_switched(trace, config, switches, monkeypatch)
    return log, result, runs_used


def assert_shared_run_equal(trace, config, monkeypatch) -> list:
    """The two runs equal; returns the lengths the shared one took runs of."""
    (_, _, runs_used), _ = same_both_ways(lambda shared: run_logged(trace, config, shared, monkeypatch))
    return runs_used


@pytest.mark.interpreted  # patches Pool methods and module flags, which the compiled core binds
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases(), mode=st.sampled_from(["replay", "timed"]))
def test_freetokens_runs_are_the_same_with_shared_runs(case, mode, monkeypatch):
    trace, config = case
    assert_shared_run_equal(trace, replace(config, mode=mode), monkeypatch)  # a refused config: rejected


@pytest.mark.interpreted
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=MARCONI_CASES[0][:2])
@example(case=MARCONI_CASES[3][:2])
def test_marconis_runs_are_the_same_with_shared_runs(case, monkeypatch):
    trace, config = case
    assert_shared_run_equal(trace, config, monkeypatch)  # a configuration the engine refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("case", [c[:2] for c in FIXED_CASES])
def test_the_fixed_replays_take_shared_runs(case, monkeypatch):
    """A test of the fixed examples: each replay extends its requests' lists from shared runs and fills freed
    SWA from them by the dozen, runs of several lengths (a replay that never took them would pass anything; the
    four take 280 to 902 extends of 10 to 39 lengths and 86 to 394 fills of 5 to 20)."""
    trace, config = case
    runs_used = assert_shared_run_equal(trace, replace(config, mode="replay"), monkeypatch)
    extends = [count for kind, count in runs_used if kind == "ids"]
    fills = [count for kind, count in runs_used if kind == "nones"]
    assert len(extends) >= 200 and len(set(extends)) >= 5
    assert len(fills) >= 50 and len(set(fills)) >= 4


@pytest.mark.interpreted  # sets the module's budget, which the compiled core binds
def test_runs_past_the_budget_are_made_each_time_and_not_kept(monkeypatch):
    monkeypatch.setattr(repeats, "MAX_KEPT_ITEMS", 10)
    runs = repeats.KeptRuns(None)
    assert runs.of(6) is runs.of(6) and runs.num_kept_items == 6
    past = runs.of(5)  # 6 + 5 > 10: made, handed out, not kept
    assert past == (None,) * 5 and runs.of(5) is not past and 5 not in runs.runs
    assert runs.of(4) is runs.of(4) and runs.num_kept_items == 10
