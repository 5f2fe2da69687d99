"""A freeing stretch's page steps told to the bounds' recorder as one ``StretchSteps`` (``sim/sched/stretch_steps.py``,
switch ``sglang_free_stretch.STRETCH_AS_ONE``) and read at once (``sim/bounds/stretch_record.py``) log what the
reference logs, a ``DecodeBatch`` a full step read step by step.

Hand-built: the recorder of ``test_recorder_decode_runs.py`` (r0's output quoted by a looked-up request, r1 plain,
r2 past its last computed page part-way), drawn steps before the stretch (runs open or not), the stretch's steps
drawn a token to a few pages apart (the step-by-step reading where some are further than a page), runs of several
steps, pages 1, 2 and 4: the same log as the steps handed one by one. Whole runs: ``no-cache`` bursts on SGLang's
loop with bounds (pages 1, 2, 16, tight and roomy pools, the overlap loop on and off), switch on against off: the
recorder's log, the tables and the summary equal; two fixed bursts tell their stretches as one (>= 10 and >= 5)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_recorder_decode_runs import prefilled

from sim.bounds import recorder as recorder_module
from sim.bounds.recorder import EventRecorder
from sim.run.simulate import simulate
from sim.sched import sglang_free_stretch
from sim.sched.batch import DecodeBatch
from sim.sched.stretch_steps import StretchSteps
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst, null_bursts, null_config

LENGTHS, IDS = [8, 5, 6], ("r0", "r1", "r2")
EVENTS, RECORD_STRETCH = EventRecorder.events, recorder_module.record_stretch


@st.composite
def stretches(draw):
    """The page, the steps before the stretch (offsets), and the stretch's (offset, steps) from after them."""
    page = draw(st.sampled_from([1, 2, 4]))
    before = sorted(set(draw(st.lists(st.integers(0, 12), max_size=4))))
    at = (before[-1] + 1 if before else 0) + draw(st.integers(0, 3 * page))
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        count = draw(st.integers(1, 3))
        steps.append((at, count))
        at += count - 1 + draw(st.sampled_from([1, 1, page, page + 1, 2 * page + 1]))
    return page, before, steps


def hand_built_log(page: int, before: list[int], steps: list[tuple[int, int]], as_one: bool) -> list:
    recorder, manager, reqs = prefilled(page)
    running = [reqs[rid] for rid in IDS]
    for index, offset in enumerate(before):
        recorder.record(DecodeBatch.of_requests(2 + index, running, LENGTHS, offset), manager)
    if as_one:
        offsets, counts = [offset for offset, _ in steps], [count for _, count in steps]
        recorder.record(StretchSteps(9, list(IDS), LENGTHS, offsets, counts), manager)
    else:
        for offset, count in steps:
            recorder.record(DecodeBatch.of_requests(9 + offset, running, LENGTHS, offset), manager, count)
    return recorder.events({"r0", "r1", "r2", "r3"})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(stretches())
def test_a_stretch_read_at_once_logs_what_its_steps_do(case):
    page, before, steps = case
    assert hand_built_log(page, before, steps, True) == hand_built_log(page, before, steps, False)


def run_logged(trace: Trace, config, on: bool, monkeypatch) -> tuple:
    """The run with ``STRETCH_AS_ONE`` ``on``: the recorder's log, the result, how many stretches it read at once."""
    monkeypatch.setattr(sglang_free_stretch, "STRETCH_AS_ONE", on)
    logs: list = []
    counts = {"stretches": 0}

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def counted(*args):
        counts["stretches"] += 1
        RECORD_STRETCH(*args)

    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(recorder_module, "record_stretch", counted)
    return logs, simulate(trace, config), counts


def assert_equal_runs(trace: Trace, config, monkeypatch) -> int:
    (_, _, counts), (_, _, off_counts) = same_both_ways(lambda on: run_logged(trace, config, on, monkeypatch))
    assert not off_counts["stretches"]  # the reference reads none at once
    return counts["stretches"]


@pytest.mark.interpreted  # patches module flags and functions the compiled core binds
@settings(max_examples=40, deadline=None, derandomize=True)
@given(null_bursts())
def test_no_cache_runs_with_stretches_told_as_one_equal_the_reference(case):
    trace, config = case
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert_equal_runs(trace, replace(config, bounds=True), monkeypatch)


@pytest.mark.interpreted
@pytest.mark.parametrize(("model", "page", "floor"), [("inkling", 16, 10), ("qwen3-next", 1, 5)])
def test_a_fixed_burst_tells_its_stretches_as_one(model, page, floor, monkeypatch):
    config = null_config(model, page, 0, True, True)
    assert assert_equal_runs(Trace(growing_burst(8)), config, monkeypatch) >= floor
