"""Checkpoints inside freeing stretches (``sim/cache/swa_free_runs.py``, ``FOLD_CHECKPOINTS``): a batch run of the
default loop takes the decode checkpoints that move no pool (a spare slot of the request's own pair) at their
steps instead of stopping before each for an event step. As a property over generated ``no-cache`` bursts (models
with MAMBA and SWA, MAMBA alone, SWA alone; pages 1, 16, 64; track intervals that are and are not multiples of
the page; small pools, so runs stop for room and the loop evicts and retracts around them; bounds on and off),
every id each pool hands out and takes back, in order, every ``SwaFreed`` and ``CheckpointSaved`` event in one
order (a listener subscribed in half the examples) and the tables are those of the reference (the switch off).
The fixed bursts below take checkpoints in stretches (their floors), so the property is not met by never taking
one.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_swa_free_runs import STRETCH_RUNS

import sim.run.simulate as simulate_module
from sim.cache import swa_free_runs
from sim.cache.events import CheckpointSaved, SwaFreed
from sim.cache.pools import Pool
from sim.run.simulate import SimConfig, simulate
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst, nocache_burst

pytestmark = pytest.mark.usefixtures("default_loop_no_cache")  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

POOL_ALLOC, POOL_FREE, MAKE_MANAGER = Pool.alloc, Pool.free, simulate_module.make_manager  # before any patch
TAKE_CHECKPOINT = swa_free_runs._take_checkpoint


@st.composite
def bursts(draw):
    """Requests arriving close together, the model, the knobs of a ``no-cache`` run, its pool, and whether the
    bounds run and the pools' events are listened to."""
    return (*nocache_burst(draw, [1, 16, 64]), draw(st.booleans()), draw(st.booleans()))


def run_logged(burst, folds: bool, monkeypatch) -> tuple[list, object, int]:
    """The run (fast path on), every id each pool handed out and took back and every ``SwaFreed`` and
    ``CheckpointSaved`` (where listened), in order, and how many checkpoints its stretches took."""
    trace, model, knobs, pool_tokens, bounds, listened = burst
    moved: dict[str, list] = {}
    told: list = []
    taken = [0]

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        moved.setdefault(pool.name, []).extend(
            ("out", id) for id in ids
        )  # one id at a time: calls group them
        return ids

    def logged_free(pool, ids):
        moved.setdefault(pool.name, []).extend(("back", id) for id in ids)
        return POOL_FREE(pool, ids)

    def make_and_listen(model_spec, policy, sizes, events, **how):
        if listened:
            for kind in (SwaFreed, CheckpointSaved):
                events.subscribe(kind, lambda event: told.append(event))
        return MAKE_MANAGER(model_spec, policy, sizes, events, **how)

    def counted(*args):
        taken[0] += 1
        return TAKE_CHECKPOINT(*args)

    monkeypatch.setattr(swa_free_runs, "FOLD_CHECKPOINTS", folds)
    monkeypatch.setattr(simulate_module, "ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(simulate_module, "make_manager", make_and_listen)
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(Pool, "free", logged_free)
    monkeypatch.setattr(swa_free_runs, "_take_checkpoint", counted)
    config = SimConfig(policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=bounds)
    result = simulate(trace, config, fast_path=True)
    return [moved, told], result, taken[0]


# fixed bursts whose stretches take checkpoints: inkling at page 64 (tokens, not listened), small at page 16
# (iterations, listened), qwen3-next (MAMBA alone) at page 64
PAGE_64 = (Trace(growing_burst(8)), "inkling", dict(page_size=64, track_interval=128), 12000, False, False)
PAGE_16_ITERATIONS = (
    Trace(growing_burst(10)),
    "small",
    dict(
        page_size=16,
        track_interval=64,
        swa_free_trigger="iterations",
        swa_eviction_interval=32,
        max_running_requests=6,
    ),
    9000,
    False,
    True,
)
MAMBA_ONLY = (
    Trace(growing_burst(8)),
    "qwen3-next",
    dict(page_size=64, track_interval=128),
    12000,
    False,
    True,
)


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@STRETCH_RUNS
@given(burst=bursts())
@example(burst=PAGE_64)
@example(burst=PAGE_16_ITERATIONS)
@example(burst=MAMBA_ONLY)
def test_folded_checkpoints_leave_pools_events_and_tables_as_the_reference(burst, monkeypatch):
    on, off = same_both_ways(lambda folds: run_logged(burst, folds, monkeypatch))
    assert off[2] == 0


@pytest.mark.interpreted
@pytest.mark.parametrize("burst", [PAGE_64, PAGE_16_ITERATIONS, MAMBA_ONLY])
def test_the_fixed_bursts_take_checkpoints_in_stretches(burst, monkeypatch):
    _, _, taken = run_logged(burst, True, monkeypatch)
    assert taken > 15, taken  # they take 22, 24 and 22
