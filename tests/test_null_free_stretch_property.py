"""``no-cache``'s batch runs with the null rules' SWA frees taken inside a stretch (``sim/sched/sglang_free_stretch.py``,
switch ``FREES_IN_STRETCH``) against the reference (off: each step whose free may fire a quiet stretch's end and an
event step of its own, ``sglang_runs._event_step``).

Each case runs with the switch on and off and logs, after every batch run, the steps it took, its full steps' shape
(offset, steps, the batch handed on: its iteration and items), each running request (lengths, decode steps, frontier, planned
steps, own FULL and SWA pages), every pool (free count, high water, the ids it hands out next), the steps in flight
the rules hold and ``batch_is_full``: the logs must be equal entry by entry, and the two runs' tables and summaries
equal (the step table reads an event step's pools as a mark, the stretch's as moves). Generated bursts on both
models, pages 1, 2 and 16, tight and roomy pools, the overlap loop on and off, bounds on and off; fixed bursts put a
floor on the stretches that took a free."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_event_steps import assert_logged_runs_equal, pool_state

import sim.run.simulate as simulate_module
from sim.cache.events import StepEnded, SwaFreed
from sim.run.simulate import SimConfig, simulate
from sim.sched import counted_frees, sglang_fast, sglang_free_stretch, sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst, nocache_burst, null_bursts, null_config

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

_TAKE_BATCH_RUN = sglang_runs.take_batch_run
_TAKE_FREES = sglang_free_stretch._take_frees
_MAKE_MANAGER = simulate_module.make_manager


@pytest.fixture(autouse=True, scope="module")
def _a_batch_a_full_step():
    """Each full step's batch read here as the reference makes it: a stretch's page steps told as one
    (``STRETCH_AS_ONE``) are held to the reference by ``tests/test_stretch_steps_property.py``."""
    with mock.patch.object(sglang_free_stretch, "STRETCH_AS_ONE", False):
        yield


@pytest.fixture(autouse=True, scope="module")
def _the_heaps_order():
    """The stretch's frees taken in the heap's order (``_take_frees``, logged here): on anonymous pools they go
    request by request (``counted_frees.COUNTED_FREES``), held to the heap by ``tests/test_counted_frees_property.py``."""
    with mock.patch.object(counted_frees, "COUNTED_FREES", False):
        yield


@st.composite
def freeing_bursts(draw):
    """``nocache_burst``'s (SWA frees at drawn intervals, by tokens or by iterations; four models), the overlap
    loop on or off, bounds on or off, and whether each step's row is listened to (``StepEnded``)."""
    trace, model, knobs, pool_tokens = nocache_burst(draw, [1, 2, 16])
    knobs["overlap"] = draw(st.booleans())
    bounds = draw(st.booleans())
    config = SimConfig(policy="no-cache", model=model, knobs=knobs, pool_tokens=pool_tokens, bounds=bounds)
    return trace, config, draw(st.booleans())


def _snapshot(sched, done: int, full_steps) -> tuple:
    """What a batch run can move: its steps, its full steps' shape, its requests, the pools, the pass's flags."""
    manager = sched.manager
    shape = tuple((f.offset, f.num_steps, _batch_read(f.batch), f.finished) for f in full_steps)
    requests = tuple(
        (req.request_id, req.kv_len, req.decode_steps, req.swa_frontier, req.planned, req.checkpoint)
        + (tuple(req.spare_states), tuple(req.own_full), tuple(req.own_swa))
        for req in (manager.requests[state.request_id] for state in sched.running)
    )
    pools = tuple(pool_state(pool) for pool in manager.pools.values())
    return done, shape, requests, pools, tuple(sorted(sched.rules.in_flight)), sched.batch_is_full


def _batch_read(batch) -> tuple | None:
    """What the bounds read of a full step's batch: its iteration and each item's plan and kind."""
    if batch is None:
        return None
    return batch.iteration, tuple((item.plan, item.is_prefill) for item in batch.items)


def _logged_run(trace: Trace, config: SimConfig, switch: bool, real_ids: bool, step_events: bool) -> tuple:
    """The run with the switch as given; its result, the log, the due steps its stretches took (some may lie past
    where a stretch ends) and the SWA pages they freed.
    ``real_ids``: the pools hand out real ids (compared in the log) and every ``SwaFreed`` is logged in order;
    ``step_events``: every ``StepEnded`` too (its row and pools: the stretch then stands aside)."""
    log: list = []
    counts = {"due": 0, "freed": 0}

    def batch_run(sched, iteration, *args):
        done, full_steps = _TAKE_BATCH_RUN(sched, iteration, *args)
        log.append((iteration, _snapshot(sched, done, full_steps)))
        return done, full_steps

    def take_frees(*args):
        due_at, freed, allocated = _TAKE_FREES(*args)
        counts["due"] += len(due_at)
        counts["freed"] += sum(pages for _, pages in freed)
        return due_at, freed, allocated

    def make_and_listen(model_spec, policy, sizes, events, **how):
        if real_ids:
            events.subscribe(SwaFreed, lambda event: log.append(event))
        if step_events:
            events.subscribe(StepEnded, lambda event: log.append(event))
        return _MAKE_MANAGER(model_spec, policy, sizes, events, **how)

    with (
        mock.patch.object(simulate_module, "ANONYMOUS_IDS", not real_ids and simulate_module.ANONYMOUS_IDS),
        mock.patch.object(simulate_module, "make_manager", make_and_listen),
        mock.patch.object(sglang_free_stretch, "FREES_IN_STRETCH", switch),
        mock.patch.object(sglang_free_stretch, "_take_frees", side_effect=take_frees),
        mock.patch.object(sglang_runs, "take_batch_run", side_effect=batch_run),
        mock.patch.object(sglang_fast, "take_batch_run", side_effect=batch_run),
    ):
        result = simulate(trace, config)
    return result, log, (counts["due"], counts["freed"])


def frees_in_stretch(
    trace: Trace, config: SimConfig, real_ids: bool = False, step_events: bool = False
) -> tuple[int, int]:
    """Both runs, asserted equal run by run and table by table; the switch-on run's due steps taken in stretches,
    and the SWA pages they freed."""
    fast, fast_log, num_fast = _logged_run(trace, config, True, real_ids, step_events)
    reference, reference_log, num_reference = _logged_run(trace, config, False, real_ids, step_events)
    assert num_reference == (0, 0)
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return num_fast


@settings(max_examples=40, deadline=None, derandomize=True)
@given(null_bursts())
@example((Trace(growing_burst(6)), null_config("inkling", 1, 0, True, True)))
@example((Trace(growing_burst(6)), null_config("qwen3-next", 16, 3000, False, False)))
def test_frees_in_stretch_move_what_the_event_steps_move(case):
    frees_in_stretch(*case)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(freeing_bursts())
def test_frees_at_drawn_intervals_hand_out_and_free_the_same_ids(case):
    trace, config, step_events = case
    frees_in_stretch(trace, config, real_ids=True, step_events=step_events)


# floors: each fixed burst's switch-on run took at least this many due steps in stretches, freeing this many SWA pages
# (the counts seen)
FLOORS = [
    ("inkling", 1, 0, True, 72, 4608),
    ("inkling", 2, 12000, False, 8, 512),
    ("inkling", 16, 0, True, 67, 288),
    ("gemma-4-26b-a4b", 16, 0, True, 68, 288),
]


@pytest.mark.parametrize("model,page,pool_tokens,overlap,due,freed", FLOORS)
def test_fixed_bursts_take_frees_in_stretches(model, page, pool_tokens, overlap, due, freed):
    for bounds in (False, True):
        config = null_config(model, page, pool_tokens, overlap, bounds)
        num_due, num_freed = frees_in_stretch(Trace(growing_burst(6)), config)
        assert num_due >= due and num_freed >= freed
