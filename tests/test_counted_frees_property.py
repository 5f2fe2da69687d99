"""``no-cache``'s freeing stretches on anonymous pools with their SWA frees taken request by request and their page
starts handed out at once (``sim/sched/counted_frees.py``, switch ``COUNTED_FREES``) against the reference (off: the
due steps in step then batch order from a heap, ``sglang_free_stretch._take_frees``, the starts before each handed
out first), and ``no-cache``'s anonymous manager (``sim/engines/nocache.py``, switch ``ANONYMOUS_PAGES``) against
real ids.

Each case runs both ways and logs, after every batch run, the steps it took, its full steps' shape (offset, steps,
the batch handed on), each running request (lengths, decode steps, frontier, planned steps, own FULL and SWA pages),
every pool (free count, high water, the ids it hands out next), the steps in flight and ``batch_is_full``: the logs
must be equal entry by entry, and the two runs' tables and summaries equal. Against real ids a page is logged as
freed or held (None or not), the ids themselves being what the switch changes. Generated bursts on four models
(windows 512, 1,024, none), pages 1, 2 and 16, SWA frees by tokens or iterations at drawn intervals, the overlap
loop and bounds on and off; the real trace's head; fixed bursts put a floor on the frees taken request by request
and on the starts a window shorter than the stretch made hand out before a free.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_event_steps import assert_logged_runs_equal, pool_state

import sim.run.simulate as simulate_module
from sim.cache.events import SwaFreed
from sim.engines import nocache
from sim.run.simulate import SimConfig, simulate
from sim.sched import counted_frees, sglang_fast, sglang_free_stretch, sglang_runs
from sim.trace import Trace
from sim.trace.azure_import import import_mooncake
from tests.fast_slow_helpers import growing_burst, nocache_burst, null_bursts, null_config

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

HEAD = Path(__file__).parent / "data" / "mooncake_conversation_head.jsonl"  # the first 40 Mooncake lines
_TAKE_BATCH_RUN = sglang_runs.take_batch_run
_MAKE_MANAGER = simulate_module.make_manager
_TAKE = counted_frees.RequestFrees.take
_HAND_OUT_REST = counted_frees.RequestFrees.hand_out_rest


@pytest.fixture(autouse=True, scope="module")
def _a_batch_a_full_step():
    """Each full step's batch read here as the reference makes it (``STRETCH_AS_ONE`` has its own test)."""
    with mock.patch.object(sglang_free_stretch, "STRETCH_AS_ONE", False):
        yield


@st.composite
def freeing_bursts(draw):
    """``nocache_burst``'s (SWA frees at drawn intervals, by tokens or by iterations; four models), the overlap
    loop on or off, the iterations trigger's phase, bounds on or off."""
    trace, model, knobs, pool_tokens = nocache_burst(draw, [1, 2, 16])
    knobs["overlap"] = draw(st.booleans())
    knobs["iteration_phase"] = draw(st.sampled_from([0, 3, 64]))
    bounds = draw(st.booleans())
    return trace, SimConfig(
        policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=bounds
    )


def _pages(pages, ids: bool) -> tuple:
    """A page list as logged: its ids, or (against real ids) whether each entry is freed."""
    return tuple(pages) if ids else tuple(page is None for page in pages)


def _snapshot(sched, done: int, full_steps, ids: bool) -> tuple:
    """What a batch run can move: its steps, its full steps' shape, its requests, the pools, the pass's flags."""
    manager = sched.manager
    shape = tuple((f.offset, f.num_steps, _batch_read(f.batch), f.finished, f.swa_freed) for f in full_steps)
    requests = tuple(
        (req.request_id, req.kv_len, req.decode_steps, req.swa_frontier, req.planned, req.checkpoint)
        + (len(req.own_full), _pages(req.own_full, ids), _pages(req.own_swa, ids))
        for req in (manager.requests[state.request_id] for state in sched.running)
    )
    pools = tuple(
        pool_state(pool) if ids else (pool.num_free, pool.num_used) for pool in manager.pools.values()
    )
    return done, shape, requests, pools, tuple(sorted(sched.rules.in_flight)), sched.batch_is_full


def _batch_read(batch) -> tuple | None:
    """What the bounds read of a full step's batch: its iteration and each item's plan and kind."""
    if batch is None:
        return None
    return batch.iteration, tuple((item.plan, item.is_prefill) for item in batch.items)


def logged_run(
    trace: Trace,
    config: SimConfig,
    counted: bool,
    anonymous: bool = True,
    ids: bool = True,
    frees: bool = False,
):
    """The run with the switches as given; its result, the log, and what the request-by-request path took: its
    stretches, due steps, SWA pages freed, and starts handed out before a free (a short window). ``frees``: every
    ``SwaFreed`` logged too, in order (the stretch then keeps the heap's)."""
    log: list = []
    counts = {"stretches": 0, "due": 0, "freed": 0, "early": 0}

    def make_and_listen(model_spec, policy, sizes, events, **how):
        if frees:
            events.subscribe(SwaFreed, log.append)
        return _MAKE_MANAGER(model_spec, policy, sizes, events, **how)

    def batch_run(sched, iteration, *args):
        done, full_steps = _TAKE_BATCH_RUN(sched, iteration, *args)
        log.append((iteration, _snapshot(sched, done, full_steps, ids)))
        return done, full_steps

    def take(self, fitting):
        due_at, freed = _TAKE(self, fitting)
        counts["stretches"] += 1
        counts["due"] += len(due_at)
        counts["freed"] += sum(pages for _, pages in freed)
        return due_at, freed

    def hand_out_rest(self, stretch):
        counts["early"] += self.num_given
        return _HAND_OUT_REST(self, stretch)

    with (
        mock.patch.object(nocache, "ANONYMOUS_PAGES", anonymous),
        mock.patch.object(simulate_module, "make_manager", make_and_listen),
        mock.patch.object(counted_frees, "COUNTED_FREES", counted),
        mock.patch.object(counted_frees.RequestFrees, "take", take),
        mock.patch.object(counted_frees.RequestFrees, "hand_out_rest", hand_out_rest),
        mock.patch.object(sglang_runs, "take_batch_run", side_effect=batch_run),
        mock.patch.object(sglang_fast, "take_batch_run", side_effect=batch_run),
    ):
        result = simulate(trace, config)
    return result, log, counts


def counted_against_heap(trace: Trace, config: SimConfig, frees: bool = False) -> dict:
    """Both runs on anonymous pools, asserted equal run by run and table by table; the switch-on run's counts."""
    fast, fast_log, counts = logged_run(trace, config, True, frees=frees)
    reference, reference_log, reference_counts = logged_run(trace, config, False, frees=frees)
    assert reference_counts["stretches"] == 0
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return counts


def anonymous_against_real(trace: Trace, config: SimConfig) -> dict:
    """The anonymous manager with the counted frees against real ids with the heap, each page logged as freed or
    held: equal run by run and table by table; the switch-on run's counts."""
    fast, fast_log, counts = logged_run(trace, config, True, anonymous=True, ids=False)
    reference, reference_log, reference_counts = logged_run(trace, config, True, anonymous=False, ids=False)
    assert reference_counts["stretches"] == 0  # real ids: the heap's order is the ids'
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return counts


@settings(max_examples=40, deadline=None, derandomize=True)
@given(null_bursts())
@example((Trace(growing_burst(6)), null_config("inkling", 1, 0, True, True)))
@example((Trace(growing_burst(6)), null_config("inkling", 16, 3000, False, False)))
def test_counted_frees_move_what_the_heap_moves(case):
    counted_against_heap(*case)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(freeing_bursts())
def test_counted_frees_at_drawn_intervals(case):
    counted_against_heap(*case)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(freeing_bursts())
def test_a_swa_freed_listener_reads_the_heaps_order(case):
    counts = counted_against_heap(*case, frees=True)
    assert counts["stretches"] == 0


@settings(max_examples=25, deadline=None, derandomize=True)
@given(freeing_bursts())
def test_anonymous_pages_free_and_hold_what_real_ids_do(case):
    anonymous_against_real(*case)


@pytest.mark.parametrize("bounds", [False, True])
def test_the_real_head_takes_its_frees_request_by_request(bounds):
    trace = import_mooncake(str(HEAD), chains=True)
    config = SimConfig(policy="no-cache", bounds=bounds)
    counts = counted_against_heap(trace, config)
    assert counts["stretches"] >= 10 and counts["freed"] >= 100, counts
    anonymous_against_real(trace, config)


# floors: each fixed burst's switch-on run took at least this many stretches request by request, freeing this many
# SWA pages, and handed out this many starts before a free (the counts seen)
FLOORS = [
    ("inkling", 1, 0, True, 11, 4608, 3001),
    ("inkling", 16, 0, True, 11, 288, 187),
    ("gemma-4-26b-a4b", 16, 0, True, 6, 288, 0),
    ("inkling", 2, 12000, False, 9, 512, 0),
]


@pytest.mark.parametrize("model,page,pool_tokens,overlap,stretches,freed,early", FLOORS)
def test_fixed_bursts_take_frees_request_by_request(
    model, page, pool_tokens, overlap, stretches, freed, early
):
    config = null_config(model, page, pool_tokens, overlap, False)
    counts = counted_against_heap(Trace(growing_burst(6)), config)
    assert counts["stretches"] >= stretches and counts["freed"] >= freed and counts["early"] >= early
