"""A listener of ``PlainStepsEnded`` alone (no ``StepEnded``, no ``StepStarted``) reads the steps as the loop ends
them: it counts as one who reads step events (``EventBus.reads_step_events``), so vLLM's batch runs, which tell
a run's steps only after its last, stay off (``vllm_runs.batch_run_steps``), and each plain step it is told is
the step-by-step run's (its start and duration, as that run's ``StepEnded``), told when it ends: the pools it
reads from the manager then are that run's after the event's last step. Every other test observer listens to
``StepEnded`` too, which hid a ``reads_step_events`` that left ``PlainStepsEnded`` out."""

from __future__ import annotations

import pytest

import sim.run.simulate as simulate_module
from sim.cache.events import PlainStepsEnded, StepEnded
from sim.run.metrics import pool_values
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed
from sim.trace.generate import fanout, multiturn

MAKE_MANAGER = simulate_module.make_manager  # before any patch

TRACES = {
    "fanout": fanout(2, 6, 120, 24, 300, request_rate=40.0),
    "multiturn": multiturn(6, 3, 300, 40, 200, think_time=0.1, request_rate=20.0, seed=1),
}


def plain_steps_told(config: SimConfig, trace, monkeypatch) -> list[tuple[int, float, float, tuple]]:
    """The fast run's plain steps as a ``PlainStepsEnded``-only listener is told them: (step, start, duration,
    the manager's pools when told)."""
    managers: list = []

    def made(*args, **how):
        managers.append(MAKE_MANAGER(*args, **how))
        return managers[-1]

    def told(event: PlainStepsEnded) -> None:
        pools = pool_values(managers[0].usage())
        for shift, (start, duration) in enumerate(zip(event.starts, event.durations, strict=True)):
            steps.append((event.first_step + shift, start, duration, pools))

    steps: list[tuple[int, float, float, tuple]] = []
    monkeypatch.setattr(simulate_module, "make_manager", made)
    run_timed(trace, build(config), fast_path=True, observe=lambda bus: bus.subscribe(PlainStepsEnded, told))
    return steps


def step_by_step(config: SimConfig, trace) -> dict[int, tuple[float, float, tuple]]:
    """Each step of the step-by-step run, as its ``StepEnded`` tells it: (start, duration, pools after it)."""
    ended: dict[int, tuple[float, float, tuple]] = {}

    def on_ended(event: StepEnded) -> None:
        ended[event.step[0]] = (event.step[1], event.step[2], event.pools)

    run_timed(trace, build(config), fast_path=False, observe=lambda bus: bus.subscribe(StepEnded, on_ended))
    return ended


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("shape", sorted(TRACES))
def test_a_plain_steps_listener_is_told_each_step_as_it_ends(shape, async_scheduling, monkeypatch):
    trace = TRACES[shape]
    config = SimConfig(
        policy="vllm", mode="timed", pool_tokens=200_000, knobs=dict(async_scheduling=async_scheduling)
    )
    told, ended = plain_steps_told(config, trace, monkeypatch), step_by_step(config, trace)
    assert len(told) > 100  # plain runs happen
    assert len({step for step, *_ in told}) == len(told)
    for step, start, duration, pools in told:
        assert (start, duration) == ended[step][:2]
        # the pools when told: after the step (plain steps move none), not after a later one of the same run
        assert pools == ended[step][2], step
