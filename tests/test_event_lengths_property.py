"""An SGLang batch run's event step's batch kept as its requests' lengths and the planned requests' plans
(``sim/sched/event_lengths.py``, ``LENGTHS_BATCH``) against the reference (a ``Batch`` of every request's plan).

With the switch on and off, a timed run with bounds logs, at each event step, the items its batch makes (a lengths
batch makes them when read: what any ``StepStarted`` reader would see) and the recorder's event log at the end;
the two logs, the tables and the summaries must be equal. Generated bursts on SGLang's loop presets and
``no-cache`` (pages 1, 2, 16; tight and roomy pools), the generated timed runs of
``test_bounds_fast_paths_property.py``, a ``StepStarted`` listener beside the bounds reading every step's items
(which the recorder alone never reads), and floors on the lengths batches each fixed run made."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import assert_same_run, same_both_ways
from sglang_event_steps import POLICIES, sglang_config
from test_bounds_fast_paths_property import timed_cases

from benchmarks.real_traces import mooncake_trace, shared_dirs
from sim.bounds.recorder import EventRecorder
from sim.cache.events import StepStarted
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed, simulate
from sim.sched import event_lengths, sglang_runs
from sim.sched.batch import DecodeBatch
from sim.trace import Trace
from sim.trace.azure_import import import_mooncake
from tests.fast_slow_helpers import burst_requests, growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

EVENTS, EVENT_STEP = EventRecorder.events, sglang_runs._event_step
LOOP_POLICIES = [*POLICIES, "no-cache"]


def _items(batch) -> tuple | None:
    return None if batch is None else tuple((item.plan, item.is_prefill) for item in batch.items)


def run_logged(trace: Trace, config, on: bool) -> tuple:
    """The run with ``LENGTHS_BATCH`` as given: each event step's items and the recorder's log; the result; how
    many event steps kept a lengths batch."""
    log: list = []
    counts = {"lengths": 0}

    def event_step(*args, **kwargs):
        batch = EVENT_STEP(*args, **kwargs)
        counts["lengths"] += type(batch) is DecodeBatch
        log.append(("step", _items(batch)))
        return batch

    def events(recorder, served):
        log.append(("events", tuple(EVENTS(recorder, served))))
        return EVENTS(recorder, served)

    with (
        mock.patch.object(event_lengths, "LENGTHS_BATCH", on),
        mock.patch.object(sglang_runs, "_event_step", side_effect=event_step),
        mock.patch.object(EventRecorder, "events", events),
    ):
        result = simulate(trace, config)
    return log, result, counts


def assert_equal_runs(trace: Trace, config) -> int:
    """Both runs held equal; returns how many event steps the switch-on run kept as lengths."""
    (_, _, counts), (_, _, off_counts) = same_both_ways(lambda on: run_logged(trace, config, on))
    assert not off_counts["lengths"]  # the reference makes a ``Batch`` each
    return counts["lengths"]


@st.composite
def loop_bursts(draw):
    """A burst of 2 to 10 requests on SGLang's loop (``no-cache`` too), with bounds, pages 1, 2 or 16."""
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    policy, page = draw(st.sampled_from(LOOP_POLICIES)), draw(st.sampled_from([1, 2, 16]))
    config = sglang_config(policy, page, draw(st.sampled_from([0, 3000, 12000])), True)
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


@settings(max_examples=40, deadline=None, derandomize=True)
@given(loop_bursts())
@example((Trace(growing_burst(6)), sglang_config("no-cache", 16, 12000, True)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 2, 3000, True)))
def test_lengths_batches_equal_the_reference(case):
    assert_equal_runs(*case)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=timed_cases())
def test_the_generated_timed_runs_equal_the_reference(case):
    assert_equal_runs(*case)


# floors: the event steps each fixed run kept as lengths (the counts seen: 11, 19, 64, 11, 5; in Round 42, before
# the freeing stretches took most of ``no-cache``'s SWA frees' event steps, 78, 150, 64, 11, 5)
FLOORS = [
    (Trace(growing_burst(6)), sglang_config("no-cache", 16, 0, True), 10),  # its SWA frees' event steps
    (Trace(growing_burst(10)), sglang_config("no-cache", 2, 0, True), 15),
    (Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True), 60),
    (Trace(growing_burst(6)), sglang_config("marconi-sglang", 1, 0, True), 10),
    (Trace(growing_burst(6)), sglang_config("radix", 16, 0, True), 5),
]


@pytest.mark.parametrize("trace, config, floor", FLOORS)
def test_the_fixed_runs_keep_lengths(trace, config, floor):
    assert assert_equal_runs(trace, config) >= floor


@pytest.mark.parametrize("index", [0, 3, 4])
def test_a_step_listener_beside_the_bounds_reads_the_reference_items(index):
    """A ``StepStarted`` listener that is no batch reader reads every step's items: with lengths batches they are
    the reference's, the planned requests' plans (checkpoints, pages) included."""
    trace, config, _ = FLOORS[index]

    def run(on: bool) -> tuple:
        heard: list = []
        with mock.patch.object(event_lengths, "LENGTHS_BATCH", on):
            result = run_timed(
                trace,
                build(config),
                observe=lambda bus: bus.subscribe(StepStarted, lambda e: heard.append(_items(e.batch))),
            )
        return heard, result

    (heard, result), (reference_heard, reference) = run(True), run(False)
    assert heard and heard == reference_heard
    assert_same_run(result, reference)


HEAD = Path(__file__).resolve().parent / "data" / "mooncake_conversation_head.jsonl"  # the first 40 lines


def _real_head(limit: int) -> Trace:
    """The conversation trace's first ``limit`` requests: the shared trace where it is, else the 40-line head."""
    found = [path for path in (Path(d) / "traces" / "mooncake" for d in shared_dirs()) if path.is_dir()]
    source = mooncake_trace("conversation") if found and limit > 40 else HEAD
    if not source.exists():
        source = HEAD
    return import_mooncake(str(source), limit=limit, chains=True)


@pytest.mark.parametrize("limit", [40, 300])
def test_the_real_trace_head_equals_the_reference(limit):
    """``no-cache`` timed with bounds on the conversation trace's head (SGLang's loop, the preset's own pools):
    the logs, tables and summaries equal, and the event steps kept as lengths."""
    config = SimConfig(policy="no-cache", mode="timed", bounds=True)
    assert assert_equal_runs(_real_head(limit), config) >= (30 if limit == 40 else 250)  # 39 and 296 seen
