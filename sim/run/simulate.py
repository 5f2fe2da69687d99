"""One simulation: trace + model + policy + pools + GPU -> per-request and per-step tables + summary."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import pandas as pd
import simpy

from sim.bounds.events import replay_events
from sim.bounds.recorder import EventRecorder
from sim.bounds.summary import BoundFigures, run_bounds, served_ids
from sim.bounds.upper_bound import ideal_in_trace_order, upper_bound, with_ideal
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.misses import MissWatcher
from sim.cache.policy import Policy
from sim.cost import CostModel, get_gpu
from sim.cost.calibration import load_calibration
from sim.engines.registry import make_manager, make_scheduler
from sim.gc_pause import collector_paused
from sim.models import ModelSpec
from sim.run.backend import Backend, PredictBackend, reads_page_ids
from sim.run.config import SimConfig
from sim.run.engine import Engine
from sim.run.metrics import pool_figures, request_table, reuse_figures, time_figures
from sim.run.replay import replay_into
from sim.run.replay_records import ReplayRecords, StatesLog
from sim.run.replay_records import request_table as replay_request_table
from sim.run.setup import RunSetup, build
from sim.run.slo import capacity_figures
from sim.run.step_log import ReplaySteps
from sim.run.summary import Summary
from sim.run.why import KeptMisses, why_column, why_summary
from sim.sched.request import states_of
from sim.tokens import TokenSeq
from sim.trace import Trace

# True: a run whose page ids nobody reads (a replay; a timed run on the simulator's own backend, observed by
# no one) runs the engine's ``anonymous_manager`` (FreeToken's, Marconi's and SGLang+'s: pools of anonymous
# page ids); False: its ``manager``, the reference (tests/test_freetoken_anonymous_replay.py,
# tests/test_freetoken_anonymous_timed.py, tests/test_marconi_anonymous_ids.py)
ANONYMOUS_IDS = True
# True: a timed run's bounds build their trie from the request sequences its records hold (each made from the
# trace at its submission: two thirds of the trie's time); False: each made again (the reference;
# tests/test_bounds_fast_paths_property.py holds both equal)
BOUNDS_READ_RUN_SEQS = True
# True: a replay keeps each request's outcome as machine integers (``ReplayRecords``) and makes its record only for
# its row; False: a ``RequestState`` per request from before the first request (``states_of``, the reference;
# tests/test_replay_records.py holds both equal)
REPLAY_RECORDS = True
# True: the trace's ideal is computed with the collector paused, as the run is: its trie makes no cyclic garbage
# (tests/test_gc_pause.py), yet its allocations set off the collector's passes over the whole trace (a fresh
# 12,031 ideal: 90 young, 8 middle, 1 full, ~0.08 of its ~0.22 s); False: the caller's collector (the reference)
IDEAL_PAUSED = True
# True: once the run is over its bus is closed and of the why watcher only its misses are kept: its tables of
# evicted prefixes and tombstones (~0.3 KB a request at the fan-out) are read by later matches only, and go before
# the tables are built; False: the watcher whole until the summary (the reference)
WATCHER_MISSES_ONLY = True


@dataclass
class SimResult:
    setup: RunSetup  # the configuration as it ran
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: Summary

    @property
    def config(self) -> SimConfig:
        return self.setup.config

    @property
    def policy(self) -> Policy:
        return self.setup.policy


def simulate(
    trace: Trace,
    config: SimConfig,
    backend: Backend | None = None,
    on_step=None,
    fast_path: bool | None = None,
    setup: RunSetup | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> SimResult:
    """``on_step(done)`` is called after every engine step (replay: every request) with the number of
    requests done (finished or refused); ``on_phase(what)`` when the run is over and a long phase starts
    (the bounds). ``fast_path`` (default: whenever the backend only predicts) advances runs of plain decode
    steps without the scheduler; False forces the step-by-step loop (the tests compare the two).
    ``setup``: ``build(config)`` where the caller made it already."""
    setup = setup if setup is not None else build(config)
    # the trace's ideal reuse (``with_ideal``, cached per trace) before the run: the trie it walks is freed
    # before the run's state grows, so at a million requests the two never add up to the peak
    with collector_paused() if IDEAL_PAUSED else nullcontext():
        ideal_in_trace_order(trace)
    with collector_paused():
        if config.mode == "replay":
            return run_replay(trace, setup, on_step=on_step, on_phase=on_phase)
        return run_timed(
            trace, setup, backend=backend, on_step=on_step, fast_path=fast_path, on_phase=on_phase
        )


def cost_model(config: SimConfig, model: ModelSpec) -> CostModel:
    """The step-time prediction of ``config`` (its GPU preset, or its calibration file)."""
    calibration = load_calibration(config.calibration) if config.calibration else None
    return CostModel(model, get_gpu(config.gpu), calibration)


def run_timed(
    trace: Trace,
    setup: RunSetup,
    backend: Backend | None = None,
    on_step=None,
    fast_path: bool | None = None,
    observe: Callable[[EventBus], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> SimResult:
    """The timed engine on a setup (``simulate`` builds it from its configuration; the conformance suite
    gives the engine's exact model, policy and pools). ``observe`` is handed the run's event bus before the
    first step (the concurrent conformance check records every step from it). Where neither reads a page id
    (no ``observe``, a backend of the simulator's own) the run may hand out anonymous ones (``ANONYMOUS_IDS``;
    the bounds' ``EventRecorder`` reads positions and requests only)."""
    config, model, policy, sizes = setup.config, setup.model, setup.policy, setup.sizes
    if backend is None:
        backend = PredictBackend(cost_model(config, model))
    ids_read = observe is not None or reads_page_ids(backend) or not ANONYMOUS_IDS
    manager = make_manager(model, policy, sizes, EventBus(), ids_read=ids_read)
    if observe is not None:
        observe(manager.events)
    tracker = manager.watch_misses(trace)
    backend.attach(manager)  # a backend with memory of its own mirrors the manager's pools
    scheduler = make_scheduler(manager, policy, sizes)
    env = simpy.Environment()
    recorder = (
        EventRecorder(manager.events, trace, manager.page_size) if config.bounds else None
    )  # the bounds'
    fits = _fits_check(trace, manager)
    engine = Engine(
        env, trace, scheduler, backend, fits=fits, fast_path=fast_path, rate_scale=config.request_rate_scale
    )
    if on_step:
        engine.on_step = lambda: on_step(engine.num_done)
    engine.start()
    env.run()
    engine.close()
    tracker = _run_over(manager, tracker)
    requests = with_ideal(trace, request_table(engine.states.values()))
    events = recorder.events(served_ids(requests)) if recorder else None
    seqs = _submitted_seqs(engine) if recorder and BOUNDS_READ_RUN_SEQS else None
    return _result(setup, manager, tracker, requests, engine.steps.frame(), (trace, events, seqs), on_phase)


def _submitted_seqs(engine: Engine) -> dict[str, TokenSeq]:
    """Request id -> its prompt + output, as the engine's records hold them (``trace.request_seq``: SGLang's
    cut to the same length)."""
    return {state.request_id: state.tokens for state in engine.states.values() if state.tokens is not None}


def _result(
    setup: RunSetup,
    manager: CacheModel,
    watcher: MissWatcher | None,
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    bound_events: tuple[Trace, list | None, dict[str, TokenSeq] | None],
    on_phase: Callable[[str], None] | None = None,
) -> SimResult:
    """The tables and the summary's typed sections: reuse, time, occupancy against capacity and evictions, the
    upper bound, why each recomputed token was recomputed, and the bounds over the run's ``(trace, events, seqs)``
    (``seqs``: the requests' sequences where the run holds them)."""
    why, why_totals = why_column(requests, watcher, manager.page_size)
    requests = requests.assign(why=why)
    del why  # the column holds the texts as Arrow strings: the list's str objects go before the summary
    if isinstance(watcher, KeptMisses):
        watcher.misses = {}  # read once, here: a million requests' entries go before the summary too
    reuse = reuse_figures(requests)
    if setup.config.bounds:
        if on_phase:
            on_phase(
                "the run is over; computing the offline bounds (about as long again; --no-bounds skips them)"
            )
        trace, events, seqs = bound_events
        assert events is not None, "the run recorded its events for the bounds"
        bounds = run_bounds(trace, events, manager, reuse.cached_tokens, seqs)
    else:
        bounds = BoundFigures(bound_skipped="not asked for (--no-bounds)")
    sections = (
        time_figures(requests, steps),
        capacity_figures(requests, steps, setup.config.slo),
        pool_figures(steps, setup.sizes, manager),
        upper_bound(requests),
    )
    summary = Summary.of(reuse, *sections, why_summary(why_totals), bounds)
    # the run's state then dies by reference counting when the run returns, not in the next collection's walk
    manager.events.close()
    manager.discard()
    return SimResult(setup, requests, steps, summary)


def _run_over(manager: CacheModel, watcher: MissWatcher | None) -> MissWatcher | None:
    """The run is over: its bus closed (no handler holds the watcher), and its watcher cut to its misses."""
    if not WATCHER_MISSES_ONLY or watcher is None:
        return watcher
    manager.events.close()
    return KeptMisses(watcher.misses)


def _fits_check(trace: Trace, manager: CacheModel):
    """Why a request can never run, decided before it is queued (the manager's own answer), or None."""
    return lambda request_id: manager.never_fits(
        trace.prompt_len(request_id), trace.request(request_id).output_len
    )


def run_replay(
    trace: Trace, setup: RunSetup, on_step=None, on_phase: Callable[[str], None] | None = None
) -> SimResult:
    config, model, policy, sizes = setup.config, setup.model, setup.policy, setup.sizes
    manager = make_manager(model, policy, sizes, EventBus(), ids_read=not ANONYMOUS_IDS)
    tracker = manager.watch_misses(trace)
    steps = ReplaySteps()
    fits = _fits_check(trace, manager)
    chunk_size = policy.chunked_prefill_size
    if REPLAY_RECORDS:
        records = ReplayRecords()
        seqs = replay_into(trace, manager, chunk_size, fits, records, steps, on_step or None, config.bounds)
        tracker = _run_over(manager, tracker)
        requests = with_ideal(trace, replay_request_table(trace, steps.requests, records))
        del records
    else:
        states = states_of(trace)
        seqs = replay_into(trace, manager, chunk_size, fits, StatesLog(states), steps, on_step or None)
        tracker = _run_over(manager, tracker)
        requests = with_ideal(trace, request_table(states.values()))
        # the tables hold all that is asked of the records now: at a million requests they are 400 MB to free
        del states
    steps_frame, order = steps.frame(), steps.requests
    del steps
    events = (
        replay_events(
            trace, order, served_ids(requests), {r for r in order if fits(r) is None}, manager.page_size
        )
        if config.bounds
        else None
    )
    return _result(setup, manager, tracker, requests, steps_frame, (trace, events, seqs), on_phase)
