"""Runs are watched through typed events, never by interception: every observer (the why column's watcher, the
bounds recorder, the step log) subscribes to the run's bus, no method of a live object is replaced, and the
events say what happened (each request matched, admitted and finished once; every step logged)."""

from __future__ import annotations

import pytest

from sim.cache.events import Admitted, EventBus, Finished, Matched, PlainStepsEnded, Retracted, StepStarted
from sim.engines.registry import PRESETS
from sim.run.config import SimConfig
from sim.run.simulate import simulate
from sim.trace.generate import multiturn

TRACE = multiturn(
    num_sessions=4,
    num_turns=3,
    system_len=300,
    user_len=40,
    output_len=90,
    think_time=0.1,
    request_rate=20.0,
    seed=1,
)


def _shadowed(obj) -> list[str]:
    """Instance attributes that hide a method of the object's class (a replaced method)."""
    methods = {name for name in dir(type(obj)) if callable(getattr(type(obj), name, None))}
    # a compiled object keeps no instance dict (nothing can hide a method there): nothing to report
    attributes = vars(obj) if hasattr(obj, "__dict__") else {}
    return sorted(name for name in attributes if name in methods and not name.startswith("__"))


class _Spy:
    """Counts the events of a run, subscribing to the bus the run's manager is given."""

    def __init__(self) -> None:
        self.counts: dict[type, int] = {}

    def watch(self, events: EventBus) -> None:
        for kind in (Matched, Admitted, Finished, Retracted):
            events.subscribe(kind, lambda event, kind=kind: self._count(kind, 1))
        events.subscribe(StepStarted, lambda event: self._count(StepStarted, event.num_steps))
        events.subscribe(PlainStepsEnded, lambda event: self._count(PlainStepsEnded, len(event.starts)))

    def _count(self, kind: type, num: int) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + num


@pytest.mark.parametrize("policy", ["sglang-retain", "freetoken", "marconi", "vllm"])
@pytest.mark.parametrize("mode", ["timed", "replay"])
def test_observers_subscribe_and_nothing_is_replaced(monkeypatch, policy, mode):
    import sim.run.simulate as simulate_module

    spy, managers = _Spy(), []
    made = simulate_module.make_manager

    def make_and_watch(model, policy_, sizes, events, **how):  # (``ids_read``: as the run asks)
        manager = made(model, policy_, sizes, events, **how)
        spy.watch(events)
        managers.append(manager)
        return manager

    monkeypatch.setattr(simulate_module, "make_manager", make_and_watch)
    result = simulate(TRACE, SimConfig(policy=policy, mode=mode, pool_tokens=200_000))
    (manager,) = managers
    assert _shadowed(manager) == []
    tree = getattr(manager, "tree", None)
    assert tree is None or _shadowed(tree) == []
    served = int((result.requests["rejected"] == "").sum())
    assert spy.counts[Admitted] >= served == spy.counts[Finished] == len(TRACE)
    if mode == "timed":  # a step runs a batch, or is one of a run of plain decodes the fast path took
        assert spy.counts[StepStarted] + spy.counts.get(PlainStepsEnded, 0) == len(result.steps)
        assert spy.counts[StepStarted] > 0


def test_every_engine_publishes_on_the_bus_it_is_given():
    from sim.engines.registry import make_manager
    from sim.models import get_model
    from sim.run.config import SimConfig as Config
    from sim.run.setup import build

    for name in ("sglang", "freetoken", "vllm", "no-cache"):
        _setup = build(Config(policy=name, pool_tokens=100_000))
        model, policy, sizes = _setup.model, _setup.policy, _setup.sizes
        bus = EventBus()
        manager = make_manager(model, policy, sizes, bus)
        assert manager.events is bus
    assert PRESETS and get_model("inkling")
