"""Two cuts of a timed run with bounds leave the bounds' events and every output as the reference makes them:
``run_steps.WHOLE_RUNS`` (a batch run's full steps told to the recorder in one ``StepStarted``, its batch a
``RunSteps``) and ``freeing_runs.SHARED_BATCH_LISTS`` (a freeing stretch's page-step batches share one list of ids
and one of states). As a property over the generated timed runs of ``test_bounds_fast_paths_property.py`` (six
presets, pages 1 to 64, multi-turn and fan-out traces, tight pools): for each switch, the recorder's event log, the
tables and the summary equal the run with it off. Fixed cases hold floors on the cuts' use."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import assert_same_run, same_both_ways
from test_bounds_fast_paths_property import FIXED_CASES, timed_cases

from sim.bounds.recorder import EventRecorder
from sim.cache.events import PlainStepsEnded, StepEnded
from sim.run.setup import build
from sim.run.simulate import run_timed, simulate
from sim.sched import freeing_runs, run_steps

pytestmark = pytest.mark.usefixtures("default_loop_no_cache")  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

EVENTS, RUN = EventRecorder.events, EventRecorder._record_run
SHARED = freeing_runs._with_shared_batches
SWITCHES = {"WHOLE_RUNS": run_steps, "SHARED_BATCH_LISTS": freeing_runs}


def run_logged(trace, config, switch: str, on: bool, monkeypatch) -> tuple:
    """The run with ``switch`` on or off: the recorder's event log, the result, and how many whole runs the recorder
    was told and how many stretches shared their lists."""
    monkeypatch.setattr(SWITCHES[switch], switch, on)
    logs: list = []
    counts = {"runs": 0, "shared": 0}

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def whole(recorder, full_steps, manager):
        counts["runs"] += 1
        RUN(recorder, full_steps, manager)

    def shared(*args):
        counts["shared"] += 1
        return SHARED(*args)

    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(EventRecorder, "_record_run", whole)
    monkeypatch.setattr(freeing_runs, "_with_shared_batches", shared)
    return logs, simulate(trace, config), counts


def assert_equal_runs(trace, config, switch: str, monkeypatch) -> dict:
    (_, _, counts), (_, _, off_counts) = same_both_ways(
        lambda on: run_logged(trace, config, switch, on, monkeypatch)
    )
    assert not off_counts["runs" if switch == "WHOLE_RUNS" else "shared"]  # the reference takes none
    return counts


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=timed_cases())
@example(case=FIXED_CASES[2][:2])
@example(case=FIXED_CASES[5][:2])
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_the_cuts_equal_the_reference(switch, case, monkeypatch):
    trace, config = case
    assert_equal_runs(trace, config, switch, monkeypatch)


@pytest.mark.interpreted
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_no_cache_takes_the_cuts(switch, monkeypatch):
    trace, config, _ = FIXED_CASES[5]  # no-cache at page 16 on inkling: freeing stretches, SWA frees
    counts = assert_equal_runs(trace, config, switch, monkeypatch)
    assert counts["runs"] >= 10
    assert counts["shared"] >= (10 if switch == "SHARED_BATCH_LISTS" else 0)


@pytest.mark.interpreted
@pytest.mark.parametrize("kind", [StepEnded, PlainStepsEnded])
def test_a_step_listener_beside_the_bounds_gets_every_step(kind, monkeypatch):
    """Where a step event is listened to beside the bounds' recorder, each full step is told as its own
    ``StepStarted``: the listener's events, the recorder's log and the outputs equal the reference's."""
    trace, config, _ = FIXED_CASES[5]

    def run(on: bool) -> tuple:
        monkeypatch.setattr(run_steps, "WHOLE_RUNS", on)
        heard: list = []
        result = run_timed(trace, build(config), observe=lambda bus: bus.subscribe(kind, heard.append))
        return [repr(event) for event in heard], result

    (heard, result), (reference_heard, reference) = run(True), run(False)
    assert heard and heard == reference_heard
    assert_same_run(result, reference)
