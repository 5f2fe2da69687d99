"""``vllm``'s timed batch runs with the bounds on (``sim/sched/vllm_runs.py``, switch ``ANNOUNCED_RUNS``): where
only the bounds' recorder (a batch reader) listens to ``StepStarted``, a batch run's busy steps carry their batch and
the recorder is handed the same batches (iteration, steps, each item's plan), in the same order, as the loop's full
steps hand it with the switch off (the reference: no batch run where anyone listens); its event log, the tables and
the summary are equal. Over the generated traces, models, pages, async scheduling and pools of
``test_vllm_batch_runs_property.py``; the fixed examples hold floors (batch runs announced, a run stopped short,
preemptions)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_vllm_batch_runs_property import RUN_DRAWS, assert_floors, config_of, counting, trace_of

from sim.bounds.recorder import EventRecorder
from sim.run.simulate import SimConfig, simulate
from sim.sched import vllm_runs

RECORD, EVENTS = EventRecorder.record, EventRecorder.events  # the originals, before a run wraps them
REACHED: Counter = Counter()  # what the announced batch runs took, over the fixed examples


def run_recorded(trace, config: SimConfig, on: bool, monkeypatch) -> tuple:
    """The run with ``ANNOUNCED_RUNS`` ``on``: the batches the recorder was handed (each item read) and its event
    log, then the result; the batch runs taken and their event steps counted (``counting``)."""
    monkeypatch.setattr(vllm_runs, "ANNOUNCED_RUNS", on)
    logs: list = []

    def recorded(recorder, batch, manager, num_steps=1):
        logs.append((batch.iteration, num_steps, [tuple(item.plan) for item in batch.items]))
        RECORD(recorder, batch, manager, num_steps)

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    monkeypatch.setattr(EventRecorder, "record", recorded)
    monkeypatch.setattr(EventRecorder, "events", logged)
    counting(monkeypatch, REACHED)
    return logs, simulate(trace, config)


def both_ways(model: str, shape: str, size: int, output_len: int, knobs: dict, pool_tokens: int, monkeypatch):
    trace, config = trace_of(shape, size, output_len), config_of(model, knobs, pool_tokens, bounds=True)
    on, _ = same_both_ways(lambda on: run_recorded(trace, config, on, monkeypatch))
    return on[1]


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(model="tiny", shape="fanout", size=6, output_len=90, page=16, async_on=True, pool_tokens=900)
@given(**RUN_DRAWS)
def test_announced_batch_runs_tell_the_bounds_what_full_steps_do(
    model, shape, size, output_len, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch)


@pytest.mark.interpreted
def test_fixed_runs_reach_the_announced_runs_floors(monkeypatch):
    assert_floors(REACHED, both_ways, monkeypatch)
