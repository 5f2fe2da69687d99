"""The simulator's side of the concurrent check: a scenario through ``simulate`` (timed mode) on a step clock.

Every step takes one unit (``FixedStepBackend(1.0)``) and request i arrives at its step ``k_i`` (the trace's
``arrival``), so ``simulate``'s clock counts steps as the engine's driver does. The fast path is off: each
step is recorded from the run's events (the batch as it launched, the pools after it, the retractions in it).
"""

from __future__ import annotations

from conformance.compare import model_for, policy_knobs, pool_sizes
from conformance.scenario import Scenario
from conformance.trajectory import Served, Step, Trajectory, pools_of
from sim.cache.events import EventBus, Retracted, StepEnded, StepStarted
from sim.engines.registry import make_policy
from sim.gc_pause import collector_paused
from sim.run.backend import FixedStepBackend
from sim.run.setup import RunSetup
from sim.run.simulate import SimConfig, run_timed

# StepEnded.pools is (free, running, tree) per component, FULL, SWA, MAMBA (sim/run/metrics.py)
_FREE_TREE = {"FULL": (0, 2), "SWA": (3, 5), "MAMBA": (6, 8)}


class StepRecorder:
    """Subscribed to a run's bus: one ``Step`` per launched batch."""

    def __init__(self, events: EventBus, components: tuple[str, ...]):
        self.components = components
        self.steps: list[Step] = []
        self._batch: tuple = ()
        self._retracted: list[str] = []
        events.subscribe(StepStarted, self._started)
        events.subscribe(StepEnded, self._ended)
        events.subscribe(Retracted, self._retract)

    def _started(self, event: StepStarted) -> None:
        self._batch = tuple(
            (item.plan.request_id, item.plan.end - item.plan.start, item.is_prefill)
            for item in event.batch.items
        )

    def _retract(self, event: Retracted) -> None:
        self._retracted.append(event.request_id)

    def _ended(self, event: StepEnded) -> None:
        usage = {name: (event.pools[free], event.pools[tree]) for name, (free, tree) in _FREE_TREE.items()}
        at = event.step[1]
        assert at == int(at), "a step clock run starts every step on a whole unit"
        self.steps.append(
            # sorted: an engine may report them as a set (vLLM's preempted_req_ids)
            Step(int(at), self._batch, pools_of(usage, self.components), tuple(sorted(self._retracted)))
        )
        self._retracted = []


def components_of(scenario: Scenario) -> tuple[str, ...]:
    config = scenario.config
    return ("FULL",) + ("SWA",) * config.has_swa + ("MAMBA",) * config.has_mamba


def simulated_steps(scenario: Scenario, preset: str) -> Trajectory:
    """``simulate`` on the scenario's exact model, knobs and pools, one unit per step."""
    model = model_for(scenario)
    policy = make_policy(preset, **policy_knobs(scenario, preset))
    config = SimConfig(policy=preset, model="tiny", gpu="h200", mode="timed", bounds=False)
    recorders: list[StepRecorder] = []
    with collector_paused():
        result = run_timed(
            scenario.trace(),
            RunSetup(config, model, policy, pool_sizes(scenario, preset)),
            backend=FixedStepBackend(1.0),
            fast_path=False,
            observe=lambda events: recorders.append(StepRecorder(events, components_of(scenario))),
        )
    requests = {}
    for row in result.requests.itertuples():
        served = not row.rejected
        finished = int(row.finished_at) if served and row.finished_at is not None else None
        requests[row.id] = Served(int(row.cached_tokens) if served else 0, served, finished, row.rejected)
    return Trajectory(tuple(recorders[0].steps), requests)
