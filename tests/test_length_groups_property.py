"""The bounds' recorder reading a batch run's consecutive decode steps on one lengths list as one group
(``length_groups.GROUPED``) logs what reading each step alone logs (off, the reference).

By hand: a recorder after three requests' prefills (one of them quoted by a looked-up request, so its pages are never
folded; one past its last computed page part-way), then a run's full steps at drawn offsets and step counts sharing
one lengths list (steps a page apart or more, several tokens a step, a step of other requests between): the logs
equal. Whole runs: ``no-cache`` bursts on SGLang's loop (its freeing stretches make the groups) and the generated
timed runs of ``test_bounds_fast_paths_property.py``, bounds on: the recorder's event log, the tables and the summary
equal with the switch on and off (and with ``events.READERS_ANSWER_KEPT``, the bus's answer to "only batch readers?"
kept, measured with it as one change); a fixed burst puts a floor on the requests a group extended at once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_bounds_fast_paths_property import FIXED_CASES, timed_cases
from test_recorder_decode_runs import prefilled

from sim.bounds import length_groups
from sim.bounds.recorder import EventRecorder
from sim.cache import events as events_module
from sim.run.simulate import SimConfig, simulate
from sim.sched.batch import DecodeBatch, FullStep
from sim.trace import Trace
from tests.fast_slow_helpers import nocache_burst

pytestmark = pytest.mark.interpreted  # patches a module flag and methods the compiled core binds

EVENTS, EXTENDED = EventRecorder.events, length_groups._extended
SERVED = {"r0", "r1", "r2", "r3"}


def hand_log(
    page: int, shape: list[tuple[int, int]], between: int | None, grouped: bool, monkeypatch
) -> list:
    """The log after a run of full steps ``(gap to the step before, tokens)`` over r0, r1, r2 on one lengths list
    (a step of r1 alone, on a list of its own, after step ``between``)."""
    monkeypatch.setattr(length_groups, "GROUPED", grouped)
    recorder, manager, reqs = prefilled(page)
    running = [reqs[rid] for rid in ("r0", "r1", "r2")]
    lengths, full_steps, offset = [8, 5, 6], [], 0
    for index, (gap, num_steps) in enumerate(shape):
        offset += gap
        full_steps.append(
            FullStep(
                offset, 1, DecodeBatch.of_requests(2 + offset, running, lengths, offset), None, num_steps
            )
        )
        if index == between:
            alone = DecodeBatch.of_requests(2 + offset, [reqs["r1"]], [5], offset + num_steps)
            full_steps.append(FullStep(offset + num_steps, 1, alone, None))
        offset += num_steps - 1
    recorder._record_run(full_steps, manager)
    return recorder.events(SERVED)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page=st.sampled_from([1, 2, 4, 16]),
    shape=st.lists(
        st.tuples(st.integers(1, 6) | st.integers(7, 20), st.integers(1, 4)), min_size=1, max_size=12
    ),
    between=st.none() | st.integers(0, 11),
)
@example(page=4, shape=[(1, 1)] * 10, between=None)
@example(page=1, shape=[(1, 1), (1, 1), (2, 1), (1, 1)], between=None)  # a page skipped once runs are open
@example(page=4, shape=[(1, 1), (1, 2), (5, 1), (1, 1)], between=0)
def test_a_group_logs_what_its_steps_log_alone(page, shape, between, monkeypatch):
    grouped = hand_log(page, shape, between, True, monkeypatch)
    assert grouped == hand_log(page, shape, between, False, monkeypatch)


SWITCHES = {"GROUPED": length_groups, "READERS_ANSWER_KEPT": events_module}  # measured as one change


def run_logged(trace: Trace, config: SimConfig, on: bool, monkeypatch, switch: str = "GROUPED") -> tuple:
    """The run with ``switch`` ``on``: the recorder's event log, the result, and how many requests a group
    extended at once."""
    monkeypatch.setattr(SWITCHES[switch], switch, on)
    logs: list = []
    counts = {"extended": 0}

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def extended(*args):
        took = EXTENDED(*args)
        counts["extended"] += took
        return took

    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(length_groups, "_extended", extended)
    return logs, simulate(trace, config), counts


@st.composite
def null_bursts(draw):
    """``nocache_burst``'s (SWA frees at drawn intervals; four models), the overlap loop on or off, bounds on."""
    trace, model, knobs, pool_tokens = nocache_burst(draw, [1, 2, 16])
    knobs["overlap"] = draw(st.booleans())
    return trace, SimConfig(
        policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=True, mode="timed"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=null_bursts() | timed_cases())
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_the_runs_equal_the_reference(switch, case, monkeypatch):
    trace, config = case
    same_both_ways(lambda on: run_logged(trace, config, on, monkeypatch, switch))


def test_no_cache_groups_its_stretches(monkeypatch):
    """``no-cache`` at page 16 on inkling, multi-turn, on SGLang's loop (its freeing stretches): the same run, and
    groups extended requests at once."""
    trace, config, _ = FIXED_CASES[5]
    (_, _, counts), (_, _, off_counts) = same_both_ways(lambda on: run_logged(trace, config, on, monkeypatch))
    assert counts["extended"] >= 10 and off_counts["extended"] == 0
