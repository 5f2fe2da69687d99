"""``vllm``'s timed batch runs with the bounds on (``sim/sched/vllm_runs.py``, switch ``ANNOUNCED_RUNS``): where
only the bounds' recorder (a batch reader) listens to ``StepStarted``, a batch run's busy steps carry their batch and
the recorder is handed the same batches (iteration, steps, each item's plan), in the same order, as the loop's full
steps hand it with the switch off (the reference: no batch run where anyone listens); its event log, the tables and
the summary are equal. Over the generated traces, models, pages, async scheduling and pools of
``test_vllm_batch_runs_property.py``; the same for runs through a last output (switch ``THROUGH_LAST_OUTPUT``, the
announced runs on both ways: the last output's step announced with the run's). The fixed examples hold floors (batch
runs announced, a run stopped short, runs ended at a last output, preemptions)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_vllm_batch_runs_property import RUN_DRAWS, assert_floors, config_of, trace_of

from sim.bounds.recorder import EventRecorder
from sim.cache.blocks import decode_batch
from sim.run.simulate import SimConfig, simulate
from sim.sched import vllm, vllm_runs

RECORD, EVENTS = EventRecorder.record, EventRecorder.events  # the originals, before a run wraps them
REACHED: Counter = Counter()  # what the announced batch runs took, over the fixed examples


def run_recorded(trace, config: SimConfig, on: bool, monkeypatch, switch: str = "ANNOUNCED_RUNS") -> tuple:
    """The run with ``vllm_runs``' ``switch`` ``on``: the batches the recorder was handed (each item read) and its
    event log, then the result; the batch runs taken, their event steps and last outputs counted (switch on only)."""
    monkeypatch.setattr(vllm_runs, switch, on)
    logs: list = []
    take, take_run = decode_batch.take_decode_batch, vllm_runs.take_batch_run

    def recorded(recorder, batch, manager, num_steps=1):
        logs.append((batch.iteration, num_steps, [tuple(item.plan) for item in batch.items]))
        RECORD(recorder, batch, manager, num_steps)

    def logged(recorder, served):
        logs.append(EVENTS(recorder, served))
        return logs[-1]

    def counted(manager, reqs, iteration, num_steps):
        taken, steps = take(manager, reqs, iteration, num_steps)
        REACHED["runs"] += on and taken > 0
        REACHED["event steps"] += on and len(steps)
        REACHED["stopped short"] += on and 0 < taken < num_steps
        return taken, steps

    def counted_run(manager, runs, iteration, num_steps):
        taken, full_steps = take_run(manager, runs, iteration, num_steps)
        REACHED["last outputs"] += on and bool(full_steps and full_steps[-1].finished)
        return taken, full_steps

    monkeypatch.setattr(vllm, "take_batch_run", counted_run)
    monkeypatch.setattr(EventRecorder, "record", recorded)
    monkeypatch.setattr(EventRecorder, "events", logged)
    monkeypatch.setattr(vllm_runs, "take_decode_batch", counted)
    return logs, simulate(trace, config)


def both_ways(
    model: str, shape: str, size: int, output_len: int, knobs: dict, pool_tokens: int, monkeypatch, **more
):
    """The recorded run with ``more["switch"]`` (else ``ANNOUNCED_RUNS``) on and off: the same batches and run."""
    trace = trace_of(shape, size, output_len, more.get("spread", 0))
    config = config_of(model, knobs, pool_tokens, bounds=True)
    switch = more.get("switch", "ANNOUNCED_RUNS")
    on, _ = same_both_ways(lambda on: run_recorded(trace, config, on, monkeypatch, switch))
    return on[1]


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    model="tiny", shape="fanout", size=6, output_len=90, spread=0, page=16, async_on=True, pool_tokens=900
)
@given(**RUN_DRAWS)
def test_announced_batch_runs_tell_the_bounds_what_full_steps_do(
    model, shape, size, output_len, spread, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch, spread=spread)


@pytest.mark.interpreted
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(
    model="tiny", shape="fanout", size=6, output_len=60, spread=30, page=16, async_on=False, pool_tokens=900
)
@given(**RUN_DRAWS)
def test_runs_through_a_last_output_tell_the_bounds_what_full_steps_do(
    model, shape, size, output_len, spread, page, async_on, pool_tokens, monkeypatch
):
    knobs = {"page_size": page, "async_scheduling": async_on}
    switch = "THROUGH_LAST_OUTPUT"
    both_ways(model, shape, size, output_len, knobs, pool_tokens, monkeypatch, spread=spread, switch=switch)


@pytest.mark.interpreted
def test_fixed_runs_reach_the_announced_runs_floors(monkeypatch):
    assert_floors(REACHED, both_ways, monkeypatch)
