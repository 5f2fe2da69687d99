"""One simulation: trace + model + policy + pools + GPU -> per-request and per-step tables + summary."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import simpy

from sim.bounds.events import EventRecorder, replay_events
from sim.bounds.summary import run_bounds, served_ids
from sim.bounds.upper_bound import upper_bound, with_ideal
from sim.cache.components import Component
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.misses import MissWatcher
from sim.cache.policy import Policy
from sim.cache.sizing import PoolSizes
from sim.cost import CostModel, get_gpu
from sim.cost.calibration import load_calibration
from sim.engines.registry import make_manager, make_scheduler
from sim.models import ModelSpec
from sim.run.backend import Backend, PredictBackend
from sim.run.config import SimConfig
from sim.run.engine import Engine
from sim.run.gc_pause import collector_paused
from sim.run.metrics import POOL_COLUMNS, pool_capacity, pool_values, request_table, summarize
from sim.run.replay import replay_trace
from sim.run.setup import build
from sim.run.summary import Summary
from sim.run.why import why_summary, with_why
from sim.sched.request import states_of
from sim.trace import Trace


@dataclass
class SimResult:
    config: SimConfig
    policy: Policy
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: Summary


def simulate(
    trace: Trace,
    config: SimConfig,
    backend: Backend | None = None,
    on_step=None,
    fast_path: bool | None = None,
) -> SimResult:
    """``on_step(done)`` is called after every engine step (replay: every request) with the number of
    requests done (finished or refused). ``fast_path`` (default: whenever the backend only predicts)
    advances runs of plain decode steps without the scheduler; False forces the step-by-step loop (the
    tests compare the two)."""
    with collector_paused():
        if config.mode == "replay":
            return run_replay(trace, config, *build(config), on_step=on_step)
        return run_timed(trace, config, *build(config), backend=backend, on_step=on_step, fast_path=fast_path)


def cost_model(config: SimConfig, model: ModelSpec) -> CostModel:
    """The step-time prediction of ``config`` (its GPU preset, or its calibration file)."""
    calibration = load_calibration(config.calibration) if config.calibration else None
    return CostModel(model, get_gpu(config.gpu), calibration)


def run_timed(
    trace: Trace,
    config: SimConfig,
    model: ModelSpec,
    policy: Policy,
    sizes: PoolSizes,
    backend: Backend | None = None,
    on_step=None,
    fast_path: bool | None = None,
) -> SimResult:
    """The timed engine on an explicit model, policy and pool sizes (``simulate`` derives them from
    ``config``; the conformance suite gives the engine's exact ones)."""
    manager = make_manager(model, policy, sizes, EventBus())
    tracker = manager.watch_misses()
    if backend is None:
        backend = PredictBackend(cost_model(config, model))
    backend.attach(manager)  # a backend with memory of its own mirrors the manager's pools
    scheduler = make_scheduler(manager, policy, sizes)
    env = simpy.Environment()
    recorder = (
        EventRecorder(manager.events, trace, manager.page_size) if config.bounds else None
    )  # the bounds'
    fits = _fits_check(trace, manager)
    engine = Engine(env, trace, scheduler, backend, fits=fits, fast_path=fast_path)
    if on_step:
        engine.on_step = lambda: on_step(engine.num_done)
    engine.start()
    env.run()
    requests = with_ideal(trace, request_table(engine.states.values()))
    events = recorder.events(served_ids(requests)) if recorder else None
    return _result(config, policy, sizes, manager, tracker, requests, engine.steps.frame(), (trace, events))


def _result(
    config: SimConfig,
    policy: Policy,
    sizes: PoolSizes,
    manager: CacheModel,
    tracker: MissWatcher | None,
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    bound_events: tuple[Trace, list | None],
) -> SimResult:
    """The tables and the summary: reuse, occupancy against capacity, evictions, the upper bound, why
    each recomputed token was recomputed, and the bounds over the run's ``(trace, events)``."""
    page_size = manager.page_size
    requests = with_why(requests, tracker, page_size)
    figures = (
        summarize(requests, steps, page_size)
        | pool_capacity(sizes, page_size, manager.has_swa, manager.has_mamba)
        | eviction_counts(manager)
        | upper_bound(requests)
        | why_summary(requests)
    )
    if config.bounds:
        trace, events = bound_events
        assert events is not None, "the run recorded its events for the bounds"
        figures |= run_bounds(trace, events, manager, sizes, requests)
    else:
        figures["bound_skipped"] = "not asked for (--no-bounds)"
    return SimResult(config, policy, requests, steps, Summary(**figures))


def eviction_counts(manager: CacheModel) -> dict:
    counts = manager.num_evictions()
    return {f"evictions_{comp.layer_kind}": counts[comp] for comp in Component}


def _fits_check(trace: Trace, manager: CacheModel):
    """Why a request can never run, decided before it is queued (the manager's own answer), or None."""
    return lambda request_id: manager.never_fits(
        trace.prompt_len(request_id), trace.request(request_id).output_len
    )


def run_replay(
    trace: Trace, config: SimConfig, model: ModelSpec, policy: Policy, sizes: PoolSizes, on_step=None
) -> SimResult:
    manager = make_manager(model, policy, sizes, EventBus())
    tracker = manager.watch_misses()
    states = states_of(trace)
    steps, order = [], []
    fits = _fits_check(trace, manager)
    runs = replay_trace(trace, manager, policy.chunked_prefill_size, fits)
    for index, (request_id, run, usage) in enumerate(runs):
        order.append(request_id)
        if isinstance(run, str):
            states[request_id].rejected = run
        else:
            states[request_id].match, states[request_id].inserted_len = run.match, run.inserted_len
        steps.append((index, request_id) + pool_values(usage))
        if on_step:
            on_step(index + 1)
    requests = with_ideal(trace, request_table(states.values()))
    steps_frame = pd.DataFrame(steps, columns=("step", "request") + POOL_COLUMNS)
    events = (
        replay_events(
            trace, order, served_ids(requests), {r for r in order if fits(r) is None}, manager.page_size
        )
        if config.bounds
        else None
    )
    return _result(config, policy, sizes, manager, tracker, requests, steps_frame, (trace, events))
