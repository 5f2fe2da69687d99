"""simulate() pauses the cycle collector: safe because a run makes no cyclic garbage, and the caller's
setting always comes back."""
from __future__ import annotations

import gc

import pytest
import simpy

from sim.cost import CostModel, get_gpu
from sim.engines.registry import make_manager, make_scheduler
from sim.run import simulate as sim_simulate
from sim.run.backend import PredictBackend
from sim.run.engine import Engine
from sim.run.replay import replay_trace
from sim.run.setup import build
from sim.run.simulate import SimConfig, _fits_check, simulate
from sim.sched.request import RequestState
from sim.trace import Trace, load_trace, stats
from sim.trace.stats import ideal_cached_tokens

PRESETS = ["radix", "sglang", "sglang-retain", "sglang-retain-tree", "freetoken", "freetoken-lazy", "marconi",
           "marconi-vllm"]


def _pressured(policy: str) -> tuple[Trace, SimConfig]:
    """120 Mooncake requests through pools small enough that every component evicts and splits."""
    trace = load_trace("traces/mooncake_conversation_500.jsonl")
    model = "gemma-4-26b-a4b" if "free" in policy else "inkling"
    config = SimConfig(policy=policy, model=model, pool_tokens=300_000, mamba_states=48,
                       knobs={"page_size": 64})
    return Trace(list(trace)[:120]), config


def _cyclic_garbage_of(run) -> int:
    """Unreachable objects that only the cycle collector could free, made while ``run()`` ran."""
    gc.collect()
    gc.disable()
    try:
        run()
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("policy", PRESETS)
def test_replay_makes_no_cyclic_garbage(policy):
    trace, config = _pressured(policy)
    _setup = build(config)
    model, preset, sizes = _setup.model, _setup.policy, _setup.sizes
    manager = make_manager(model, preset, sizes)  # alive through the count: its own cycles are not garbage

    def run():
        for _ in replay_trace(trace, manager, preset.chunked_prefill_size):
            pass

    assert _cyclic_garbage_of(run) == 0
    assert sum(manager.tree.num_evictions.values()) > 0  # the pools were under pressure


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("policy", ["radix", "sglang-retain", "freetoken"])
def test_timed_engine_makes_no_cyclic_garbage(policy, fast_path):
    engine = _timed_engine(policy, fast_path)

    def run():
        engine.start()
        engine.env.run()

    assert _cyclic_garbage_of(run) == 0
    assert len(engine.steps) > 0 and sum(engine.manager.tree.num_evictions.values()) > 0


def _timed_engine(policy: str, fast_path: bool | None = None) -> Engine:
    trace, config = _pressured(policy)
    _setup = build(config)
    model, preset, sizes = _setup.model, _setup.policy, _setup.sizes
    manager = make_manager(model, preset, sizes)
    return Engine(simpy.Environment(), trace, make_scheduler(manager, preset, sizes),
                  PredictBackend(CostModel(model, get_gpu("h200"))), fits=_fits_check(trace, manager),
                  fast_path=fast_path)


def _run_dropped(policy: str) -> None:
    """A timed run whose engine is dropped unclosed: its loop asleep on its wake-up event, the run in cycles."""
    engine = _timed_engine(policy)
    engine.start()
    engine.env.run()


def _sim_objects_alive() -> int:
    return sum(str(type(obj).__module__).startswith("sim.") for obj in gc.get_objects())


@pytest.mark.parametrize("policy", ["radix", "sglang-retain"])  # SGLang's scheduler held those containers
def test_a_dropped_run_is_freed_in_one_collection(policy):
    """Compiled, a container that a class's traversal visited twice (a base attribute declared again:
    ``test_compiled_attributes_declared_once``) read to the collector as held from outside: the records, matches
    and radix nodes it held outlived the collection that freed the run (and were counted as the next case's)."""
    _run_dropped(policy)  # first: whatever is built once per process
    gc.collect()
    gc.collect()  # what a first collection left of it, as below, would be counted as this run's
    before = _sim_objects_alive()
    _run_dropped(policy)
    gc.collect()  # one collection
    assert _sim_objects_alive() == before


@pytest.mark.parametrize("shared_heads", [True, False])
def test_the_ideal_makes_no_cyclic_garbage(monkeypatch, shared_heads):
    """So simulate() computes it with the collector paused (``simulate.IDEAL_PAUSED``)."""
    monkeypatch.setattr(stats, "SHARED_HEADS", shared_heads)
    trace = load_trace("traces/mooncake_conversation_500.jsonl")
    assert _cyclic_garbage_of(lambda: ideal_cached_tokens(trace)) == 0


@pytest.mark.parametrize("paused", [True, False])
def test_the_ideal_runs_with_the_collector_paused_and_restored_after(monkeypatch, paused):
    trace, config = _pressured("sglang-retain")
    seen = []
    monkeypatch.setattr(sim_simulate, "IDEAL_PAUSED", paused)
    ideal = sim_simulate.ideal_in_trace_order
    monkeypatch.setattr(
        sim_simulate, "ideal_in_trace_order", lambda trace: seen.append(gc.isenabled()) or ideal(trace)
    )
    simulate(Trace(list(trace)[:5]), config)
    assert seen == [not paused]
    assert gc.isenabled()


@pytest.mark.parametrize("mode", ["timed", "replay"])
def test_collector_is_paused_inside_and_restored_after(mode):
    trace, config = _pressured("sglang-retain")
    config = SimConfig(**{**config.__dict__, "mode": mode})
    seen = []
    simulate(Trace(list(trace)[:5]), config, on_step=lambda *args: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    trace, config = _pressured("radix")
    gc.disable()
    try:
        simulate(Trace(list(trace)[:5]), config)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_restored_when_the_run_fails():
    trace, config = _pressured("radix")

    def fail(*args):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        simulate(Trace(list(trace)[:5]), config, on_step=fail)
    assert gc.isenabled()


FINISHED_RUNS = [("vllm", "replay"), ("vllm", "timed"), ("marconi-vllm", "replay"), ("marconi-vllm", "timed"),
                 ("sglang-retain", "replay"), ("radix", "timed"), ("sglang", "timed"), ("sglang-retain", "timed"),
                 ("marconi-sglang", "timed"), ("marconi", "timed"), ("no-cache", "timed"), ("freetoken", "timed")]


@pytest.mark.parametrize(("policy", "mode"), FINISHED_RUNS)
def test_a_finished_run_leaves_no_cycles(policy, mode):
    """The run's bus is closed and its cache discarded once the result is built: the run's state dies by
    reference counting, not in a walk of the collector over all of it (a vLLM replay left 332,099 objects)."""
    trace = Trace(list(load_trace("traces/mooncake_conversation_500.jsonl"))[:30])
    config = SimConfig(policy=policy, mode=mode, bounds=False)
    simulate(trace, config)  # first: whatever is built once per process
    # left: the class pandas' ``itertuples`` makes per call (53 objects); the run's state was thousands
    assert _cyclic_garbage_of(lambda: simulate(trace, config)) < 100


@pytest.mark.parametrize(("policy", "mode"), FINISHED_RUNS)
def test_a_finished_run_frees_its_records_as_it_returns(policy, mode):
    """Every request's record dies by reference counting when the run returns, not in the collector's next
    walk: SGLang's waiting order does not hold its scheduler, and the timed loop is closed at the run's end
    (asleep on its wake-up event, its frame held the engine in a cycle with that event; at 1,000 requests the
    collector's walk over what they held took ~10 to 20 ms after each timed run)."""
    trace = Trace(list(load_trace("traces/mooncake_conversation_500.jsonl"))[:30])
    config = SimConfig(policy=policy, mode=mode, bounds=False)
    simulate(trace, config)
    gc.collect()
    gc.disable()
    try:
        before = _records_alive()
        simulate(trace, config)
        after = _records_alive()
    finally:
        gc.enable()
    assert after == before


def _records_alive() -> int:
    # by exact type: ``isinstance`` would ask some third-party objects for their ``__class__`` (and warn)
    return sum(type(obj) in (RequestState, Engine) for obj in gc.get_objects())
