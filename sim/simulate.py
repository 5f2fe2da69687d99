"""One simulation: trace + model + policy + pools + GPU -> per-request and per-step tables + summary."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd
import simpy

from sim.backend import Backend, PredictBackend
from sim.bounds.events import EventRecorder, replay_events
from sim.bounds.summary import run_bounds, served_ids
from sim.cache.components import Component
from sim.cache.interface import CacheModel, budget_sizes_for, make_manager, settle_for_gpu, shared_pool_sizes
from sim.cache.interface import eviction_counts as _evictions
from sim.cache.knobs import MAX_INT, NONE
from sim.cache.manager import CacheManager
from sim.cache.policies import Policy, make_policy
from sim.cache.resolve import resolve
from sim.cache.sizing import PoolSizes, sizes_from_memory, sizes_from_tokens
from sim.calibration import load_calibration
from sim.config import POOL_KNOBS, SimConfig  # noqa: F401  (SimConfig is part of this module's interface)
from sim.cost import CostModel, get_gpu
from sim.engine import Engine
from sim.gc_pause import collector_paused
from sim.metrics import POOL_COLUMNS, REQUEST_COLUMNS, pool_capacity, pool_values, request_row, summarize
from sim.models import ModelSpec, get_model
from sim.replay import replay_trace
from sim.scheduler import Scheduler
from sim.trace import Trace
from sim.upper_bound import upper_bound, with_ideal
from sim.why import MissTracker, why_summary, with_why


@dataclass
class SimResult:
    config: SimConfig
    policy: Policy
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: dict


class PoolSizeError(ValueError):
    """A pool size no run could use (past the 31-bit limit, or one the sizing refuses), named by its option:
    a sweep refuses its grid up front for one, where an engine's refusal of a combination fails one point."""


def build(config: SimConfig) -> tuple[ModelSpec, Policy, PoolSizes]:
    model = get_model(config.model)
    knobs = dict(config.knobs)
    if knobs.get("window") not in (None, NONE):  # none: the model's own window
        model = model.replace(window=knobs["window"])
    policy = make_policy(config.policy, **knobs)
    policy = settle_for_gpu(policy, config.gpu, {name for name, value in knobs.items() if value is not None})
    return model, policy, pool_sizes(config, model, policy)


def pool_sizes(config: SimConfig, model: ModelSpec, policy: Policy) -> PoolSizes:
    """FULL and SWA from ``pool_tokens`` (or the memory budget); MAMBA states from ``mamba_states`` or,
    when it is not given, from the memory budget's MAMBA share, whichever way the KV pools were sized."""
    if config.cache_bytes is not None:  # one byte budget (Marconi); refused for the other engines
        return budget_sizes_for(model, policy, int(config.cache_bytes))
    shared = shared_pool_sizes(model, policy, int(config.kv_memory_gb * 2**30), config.pool_tokens)
    if shared is not None:  # one pool every component shares (vLLM): its own sizing
        return shared
    page = policy.page_size
    by_memory, memory = None, (f"--kv-memory-gb {config.kv_memory_gb:g} (split by --swa-full-tokens-ratio "
                               f"{config.swa_full_tokens_ratio:g} and --mamba-full-memory-ratio "
                               f"{config.mamba_full_memory_ratio:g})")
    if config.pool_tokens is None or config.mamba_states is None:  # an explicit size is not checked against it
        with _named_by(memory):
            by_memory = sizes_from_memory(model, page, int(config.kv_memory_gb * 2**30),
                                          config.swa_full_tokens_ratio, config.mamba_full_memory_ratio)
    if config.pool_tokens is None:
        sizes = by_memory
    else:
        with _named_by(f"--pool-tokens {config.pool_tokens}"):
            sizes = sizes_from_tokens(page, config.pool_tokens, config.swa_pool_tokens, 0,
                                      config.swa_full_tokens_ratio)
    states = by_memory.states if config.mamba_states is None else config.mamba_states
    floor = swa_floor_pages(model, policy) if model.has_swa else 0
    kv_source = memory if config.pool_tokens is None else f"--pool-tokens {config.pool_tokens}"
    _within_limit("FULL", sizes.full_pages * page, "tokens", kv_source)
    _within_limit("SWA", sizes.swa_pages * page, "tokens", kv_source if config.swa_pool_tokens is None
                  else f"--swa-pool-tokens {config.swa_pool_tokens}")
    _within_limit("SWA", floor * page, "tokens", describe_swa_floor(model, policy))
    _within_limit("MAMBA", states, "states", memory if config.mamba_states is None else "--mamba-states")
    return PoolSizes(sizes.full_pages, max(sizes.swa_pages, floor) if model.has_swa else 0, states)


@contextmanager
def _named_by(option: str):
    """A pool size the sizing refuses, named by the option it came from."""
    try:
        yield
    except ValueError as e:
        raise PoolSizeError(f"{option}: {e}") from None


def _within_limit(pool: str, count: int, unit: str, source: str) -> None:
    """Every pool's token slots (and states) fit in 31 bits, as the executor's tables and the knobs need."""
    if count > MAX_INT:
        raise PoolSizeError(f"{source} gives a {pool} pool of {count} {unit}, more than {MAX_INT}")


def swa_floor_pages(model: ModelSpec, policy: Policy) -> int:
    """Enough SWA for every running request's window and one step's chunk (FreeToken's pool floor);
    ``window+interval`` also covers the retain floor's extra retention (PR #34729's second TODO)."""
    window = resolve(policy, model).window
    extra = policy.track_interval if policy.swa_pool_floor == "window+interval" else 0
    per_request = window + extra + policy.swa_eviction_interval + 2 * policy.page_size
    return (policy.max_running_requests * per_request + policy.chunked_prefill_size) // policy.page_size + 1


def describe_swa_floor(model: ModelSpec, policy: Policy) -> str:
    """The SWA pool floor's terms, named by their options (for a message about its size)."""
    extra = f" + --track-interval {policy.track_interval}" if policy.swa_pool_floor == "window+interval" else ""
    return (f"the SWA pool's floor, --max-running-requests {policy.max_running_requests} x (--window "
            f"{resolve(policy, model).window}{extra} + --swa-eviction-interval {policy.swa_eviction_interval} + 2 x "
            f"--page-size {policy.page_size}) + --chunked-prefill-size {policy.chunked_prefill_size},")


def simulate(trace: Trace, config: SimConfig, backend: Backend | None = None, on_step=None,
             fast_path: bool | None = None) -> SimResult:
    """``on_step(done)`` is called after every engine step (replay: every request) with the number of
    requests done (finished or refused). ``fast_path`` (default: whenever the backend only predicts)
    advances runs of plain decode steps without the scheduler; False forces the step-by-step loop (the
    tests compare the two)."""
    with collector_paused():
        if config.mode == "replay":
            return simulate_replay(trace, config, on_step)
        return simulate_timed(trace, config, backend, on_step, fast_path)


def cost_model(config: SimConfig, model: ModelSpec) -> CostModel:
    """The step-time prediction of ``config`` (its GPU preset, or its calibration file)."""
    calibration = load_calibration(config.calibration) if config.calibration else None
    return CostModel(model, get_gpu(config.gpu), calibration)


def simulate_timed(trace: Trace, config: SimConfig, backend: Backend | None = None, on_step=None,
                   fast_path: bool | None = None) -> SimResult:
    return run_timed(trace, config, *build(config), backend=backend, on_step=on_step, fast_path=fast_path)


def run_timed(trace: Trace, config: SimConfig, model: ModelSpec, policy: Policy, sizes: PoolSizes,
              backend: Backend | None = None, on_step=None, fast_path: bool | None = None) -> SimResult:
    """The timed engine on an explicit model, policy and pool sizes (``simulate`` derives them from
    ``config``; the conformance suite gives the engine's exact ones)."""
    manager = make_manager(model, policy, sizes)
    tracker = _miss_tracker(manager)
    if backend is None:
        backend = PredictBackend(cost_model(config, model))
    backend.attach(manager)  # a backend with memory of its own mirrors the manager's pools
    scheduler = Scheduler(manager, policy.chunked_prefill_size, max_running(policy, manager, sizes))
    env = simpy.Environment()
    log = None
    step = (lambda: on_step(len(log.finished_at) + len(log.rejected))) if on_step else None
    recorder = EventRecorder(backend, trace, manager.page_size) if config.bounds else None  # for the bounds
    engine = Engine(env, trace, scheduler, recorder or backend, fits=_fits_check(trace, manager, sizes),
                    on_step=step, fast_path=fast_path)
    log = engine.log
    engine.start()
    env.run()
    requests = with_ideal(trace, _request_table(trace, engine, scheduler))
    events = recorder.events(served_ids(requests)) if recorder else None
    return _result(config, policy, sizes, manager, tracker, requests, engine.log.steps.frame(), (trace, events))


def _miss_tracker(manager) -> MissTracker | None:
    """The why column's watcher, on a radix-tree manager (vLLM's block cache gives the coarse reasons)."""
    return MissTracker(manager) if isinstance(manager, CacheManager) else None


def _result(config: SimConfig, policy: Policy, sizes: PoolSizes, manager: CacheModel, tracker: MissTracker | None,
            requests: pd.DataFrame, steps: pd.DataFrame, bound_events: tuple) -> SimResult:
    """The tables and the summary: reuse, occupancy against capacity, evictions, the upper bound, why
    each recomputed token was recomputed, and the bounds over the run's ``(trace, events)``."""
    page_size = manager.page_size
    requests = with_why(requests, tracker, page_size)
    summary = (summarize(requests, steps, page_size) | pool_capacity(sizes, page_size, manager.has_swa, manager.has_mamba)
               | eviction_counts(manager) | upper_bound(requests) | why_summary(requests))
    if config.bounds:
        summary |= run_bounds(*bound_events, manager, sizes, requests)
    else:
        summary["bound_skipped"] = "not asked for (--no-bounds)"
    return SimResult(config, policy, requests, steps, summary)


def eviction_counts(manager: CacheModel) -> dict:
    counts = _evictions(manager)
    return {f"evictions_{comp.layer_kind}": counts[comp] for comp in Component}


# SGLang caps running requests at a third of the MAMBA pool (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO):
# a running state plus two ping-pong checkpoint slots each, so admission never starves the pool
MAMBA_STATES_PER_REQUEST = 3


def max_running(policy: Policy, manager: CacheModel, sizes: PoolSizes) -> int:
    if not manager.has_mamba or manager.topology.name != "separate":  # vLLM: max_num_seqs alone
        return policy.max_running_requests
    return max(1, min(policy.max_running_requests, sizes.states // MAMBA_STATES_PER_REQUEST))


def _fits_check(trace: Trace, manager: CacheModel, sizes: PoolSizes):
    """Why a request can never run, decided before it is queued: the same needs the manager's admission
    asks of the pools (its whole sequence in FULL pages, the engine's states per admitted request)."""
    page = manager.page_size
    if manager.topology.name == "shared-blocks":  # vLLM refuses only what exceeds max_model_len
        return lambda request_id: manager.request_refusal(trace.prompt_len(request_id),
                                                          trace.request(request_id).output_len)
    states = manager.rules.admission_states if manager.has_mamba else 0

    def why_not(request_id: str) -> str | None:
        total = trace.prompt_len(request_id) + trace.request(request_id).output_len
        pages = -(-total // page)
        if pages > sizes.full_pages:
            return f"needs {pages} FULL pages, the pool has {sizes.full_pages}"
        if states > sizes.states:
            return (f"needs {states} MAMBA states (the running state + {states - 1} checkpoint slots), the pool "
                    f"has {sizes.states}")
        return None

    return why_not


def _request_table(trace: Trace, engine: Engine, scheduler: Scheduler) -> pd.DataFrame:
    log, rows = engine.log, []
    for request in trace:
        times = {"arrived": log.arrived_at.get(request.id), "first": log.first_token_at.get(request.id),
                 "finished": log.finished_at.get(request.id)}
        rows.append(request_row(trace, request.id, scheduler.admitted.get(request.id), times,
                                scheduler.num_retractions.get(request.id, 0), log.rejected.get(request.id, "")))
    inserted = [scheduler.inserted.get(request.id, 0) for request in trace]
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS).assign(inserted_tokens=inserted)


def simulate_replay(trace: Trace, config: SimConfig, on_step=None) -> SimResult:
    """Replay mode: each request prefilled and decoded alone, in arrival order; one usage row each."""
    return run_replay(trace, config, *build(config), on_step=on_step)


def run_replay(trace: Trace, config: SimConfig, model: ModelSpec, policy: Policy, sizes: PoolSizes,
               on_step=None) -> SimResult:
    manager = make_manager(model, policy, sizes)
    tracker = _miss_tracker(manager)
    rows, steps, inserted, order = {}, [], {}, []
    fits = _fits_check(trace, manager, sizes)
    runs = replay_trace(trace, manager, policy.chunked_prefill_size, fits)
    for index, (request_id, run, usage) in enumerate(runs):
        order.append(request_id)
        refused = isinstance(run, str)
        rows[request_id] = request_row(trace, request_id, None if refused else run.match, {}, 0,
                                       run if refused else "")
        inserted[request_id] = 0 if refused else run.inserted_len
        steps.append((index, request_id) + pool_values(usage))
        if on_step:
            on_step(index + 1)
    requests = pd.DataFrame([rows[r.id] for r in trace], columns=REQUEST_COLUMNS)  # in trace order
    requests = with_ideal(trace, requests.assign(inserted_tokens=[inserted[r.id] for r in trace]))
    steps_frame = pd.DataFrame(steps, columns=("step", "request") + POOL_COLUMNS)
    events = replay_events(trace, order, served_ids(requests), {r for r in order if fits(r) is None},
                           manager.page_size) if config.bounds else None
    return _result(config, policy, sizes, manager, tracker, requests, steps_frame, (trace, events))
