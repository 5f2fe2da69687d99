"""Every backend offers all the ``Backend`` protocol declares, and the engine takes the fast path exactly when
the backend only predicts (no probing of what a backend happens to have)."""
from __future__ import annotations

import pytest

from sim.cost import CostModel, get_gpu
from sim.models import get_model
from sim.run.backend import Backend, FixedStepBackend, PredictBackend
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn

MEMBERS = ("predicts_only", "attach", "run", "decode_times", "decode_run")


def _backends():
    predict = PredictBackend(CostModel(get_model("inkling"), get_gpu("h200")))
    found = [predict, FixedStepBackend(0.01)]
    try:
        from executor.backend import ExecutorBackend
    except ImportError:  # the executor's extra (torch) is not installed
        return found
    return found + [ExecutorBackend.__new__(ExecutorBackend)]


def test_the_protocol_declares_what_the_engine_uses():
    declared = set(Backend.__annotations__) | {name for name in vars(Backend) if not name.startswith("_")}
    assert declared >= set(MEMBERS)


@pytest.mark.parametrize("backend", _backends(), ids=lambda b: type(b).__name__)
def test_every_backend_offers_the_whole_protocol(backend):
    missing = [name for name in MEMBERS if not hasattr(backend, name)]
    assert not missing, f"{type(backend).__name__} lacks {missing}"
    assert isinstance(backend.predicts_only, bool)


class _Counting(FixedStepBackend):
    """Counts the steps that go through ``run``; ``predicts_only`` as given."""

    def __init__(self, predicts_only: bool):
        super().__init__(0.01)
        self.predicts_only, self.num_runs, self.attached = predicts_only, 0, None

    def attach(self, manager) -> None:
        self.attached = manager

    def run(self, batch, manager) -> float:
        self.num_runs += 1
        return super().run(batch, manager)


def test_a_backend_that_does_not_only_predict_runs_every_step_and_is_attached():
    trace = multiturn(num_sessions=2, num_turns=2, system_len=100, user_len=20, output_len=120,
                      think_time=0.2, request_rate=5.0, seed=3)
    config = SimConfig(policy="sglang", model="inkling", pool_tokens=40_000, bounds=False)
    predicting, running = _Counting(True), _Counting(False)
    fast, slow = simulate(trace, config, backend=predicting), simulate(trace, config, backend=running)
    assert running.attached is not None and predicting.attached is not None
    assert running.num_runs == len(slow.steps)  # every step went through run
    assert predicting.num_runs < len(fast.steps)  # the fast path took runs of decode steps in one event
    assert fast.steps.equals(slow.steps)
