"""Freeing stretches (``sim/cache/swa_free_runs.py``): a batch run of the default loop takes its requests' SWA frees
inside a stretch instead of stopping at each for an event step. As a property over generated ``no-cache`` bursts
(pages 1, 2, 16, 64; the trigger by tokens and by iterations; small pools, so runs stop for room and the loop
evicts and retracts around them; bounds on and off), every id each pool hands out, in order, every ``SwaFreed``
event (a listener subscribed in half the examples: the frees are told as the steps tell them) and the tables are
those of the reference (``loop_runs.FOLD_SWA_FREES = False``: a stretch stops at each free). The fixed bursts
below take frees in stretches (their floors), so the property is not met by never taking one.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.run.simulate as simulate_module
from sim.cache import swa_free_runs
from sim.cache.events import SwaFreed
from sim.cache.pools import Pool
from sim.run.simulate import SimConfig, simulate
from sim.sched import loop_runs
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

pytestmark = pytest.mark.usefixtures("default_loop_no_cache")  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)

POOL_ALLOC, MAKE_MANAGER = Pool.alloc, simulate_module.make_manager  # before any patch
# a stretch property's runs (also tests/test_checkpoint_folds.py's): fixed examples, each a whole simulated run
STRETCH_RUNS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
TAKE_FREEING = swa_free_runs.take_freeing_decodes


@st.composite
def bursts(draw):
    """Requests arriving close together, and the knobs of a ``no-cache`` run."""
    requests = burst_requests(draw, draw(st.integers(3, 12)), 2500, 900, 400)
    page = draw(st.sampled_from([1, 2, 16, 64]))
    knobs = dict(
        page_size=page,
        max_running_requests=draw(st.integers(2, 12)),
        track_interval=64 * draw(st.integers(1, 4)),
        swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
        swa_eviction_interval=draw(st.sampled_from([1, 7, 32, 128])),
        chunked_prefill_size=max(page, 16) * draw(st.integers(4, 32)),
    )
    pool_tokens = draw(st.sampled_from([3000, 6000, 12000, 40000]))
    return (
        Trace(sorted(requests, key=lambda r: r.arrival)),
        knobs,
        pool_tokens,
        draw(st.booleans()),
        draw(st.booleans()),
    )


def run_logged(burst, folds: bool, monkeypatch) -> tuple[list, object, int]:
    """The run (fast path on), every id each pool handed out and every ``SwaFreed`` (where listened), in order,
    and the steps whose SWA frees its freeing stretches took."""
    trace, knobs, pool_tokens, bounds, listened = burst
    handed: dict[str, list[int]] = {}
    told: list = []  # the frees as events, where listened (apart: the order against allocations is the ids')
    frees = [0]

    def logged_alloc(pool, count):
        ids = POOL_ALLOC(pool, count)
        handed.setdefault(pool.name, []).extend(ids)  # per pool: a stretch hands out FULL's, then SWA's
        return ids

    def make_and_listen(model, policy, sizes, events, **how):
        if listened:
            events.subscribe(SwaFreed, lambda event: told.append(event))
        return MAKE_MANAGER(model, policy, sizes, events, **how)

    def counted(*args):
        freed = TAKE_FREEING(*args)
        frees[0] += len(freed)
        return freed

    monkeypatch.setattr(loop_runs, "FOLD_SWA_FREES", folds)
    monkeypatch.setattr(simulate_module, "ANONYMOUS_IDS", False)  # real ids: they are compared
    monkeypatch.setattr(simulate_module, "make_manager", make_and_listen)
    monkeypatch.setattr(Pool, "alloc", logged_alloc)
    monkeypatch.setattr(swa_free_runs, "take_freeing_decodes", counted)
    config = SimConfig(
        policy="no-cache", model="inkling", knobs=knobs, pool_tokens=pool_tokens, bounds=bounds
    )
    result = simulate(trace, config, fast_path=True)
    return [handed, told], result, frees[0]


# fixed bursts whose stretches take frees: at page 64 and 16, tokens and iterations, bounds off, listened or not
PAGE_64 = (Trace(growing_burst(8)), dict(page_size=64), 12000, False, False)
PAGE_16_ITERATIONS = (
    Trace(growing_burst(10)),
    dict(page_size=16, swa_free_trigger="iterations", swa_eviction_interval=32, max_running_requests=6),
    9000,
    False,
    True,
)


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@STRETCH_RUNS
@given(burst=bursts())
@example(burst=PAGE_64)
@example(burst=PAGE_16_ITERATIONS)
def test_freeing_stretches_leave_pools_events_and_tables_as_the_reference(burst, monkeypatch):
    on, off = same_both_ways(lambda folds: run_logged(burst, folds, monkeypatch))
    assert off[2] == 0


@pytest.mark.interpreted
@pytest.mark.parametrize("burst", [PAGE_64, PAGE_16_ITERATIONS])
def test_the_fixed_bursts_take_frees_in_stretches(burst, monkeypatch):
    _, _, frees = run_logged(burst, True, monkeypatch)
    assert frees > 20
