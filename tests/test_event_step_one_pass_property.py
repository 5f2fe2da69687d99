"""An SGLang batch run's event step read in one pass (``sim/sched/sglang_event_plans.py``): whether it fits and each
request's event and pages read once (``ONE_PASS``, with its completion in one loop), the page-only requests' pages
counted out of anonymous pools at once (``PAGES_AT_ONCE``), and the run's pass begun with only the steps in flight
(``DECODE_PASS``), against the reference (all three off: ``event_step_fits``, ``_event_step``'s own reads, a
``prepare_page_decode`` each, ``complete_decode`` each, ``manager.begin_pass``, and the fit a run that processes
ended requests is let in on read again at its first step).

Each case runs with the switches on and off and logs every event step's fit (taken or not; the run's first step's
read once, ``_leave_running``'s, where the reference reads it again) and, after every
event step, each of its requests (lengths, decode steps, frontier, planned and taken checkpoints, spare states,
own FULL and SWA pages), every pool (free count, high water, the freed lists it hands out next), the tree (pages,
states, evictions), the steps in flight the rules hold, and the batch where the bounds read it: the two logs must
be equal entry by entry, and the two runs' tables and summaries equal. Generated bursts on the presets of SGLang's
loop at pages 1, 2 and 16, tight and roomy pools, bounds on and off; fixed bursts put floors on the steps the
switch-on run took in one pass, the pages it counted out at once and the passes it began with the steps in
flight alone, each counted in its own run."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from sglang_event_steps import (
    logged_on_against_off,
    pool_state,
    sglang_bursts,
    sglang_config,
    simulate_patched,
)

from sim.run.simulate import SimConfig
from sim.sched import sglang_carried, sglang_event_plans, sglang_fast, sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the calls go through patches the compiled core would not see
pytestmark = pytest.mark.interpreted

SWITCHES = ("ONE_PASS", "PAGES_AT_ONCE", "DECODE_PASS")


@pytest.fixture(autouse=True, scope="module")
def _events_asked_of_the_rules():
    """Each event step's fit read through ``step_fits_and_needs``, which the log here watches: the carried silent
    steps read it without it (``sglang_carried.CARRY_SILENT_STEPS``, held to this by
    ``tests/test_sglang_carried_property.py``)."""
    with mock.patch.object(sglang_carried, "CARRY_SILENT_STEPS", False):
        yield


_EVENT_STEP, _FITS = sglang_runs._event_step, sglang_runs.step_fits_and_needs
_TAKE_PAGES, _BEGIN = sglang_event_plans.take_anonymous_pages, sglang_event_plans.begin_decode_pass


def _request_state(req) -> tuple:
    lengths = (req.request_id, req.kv_len, req.decode_steps, req.swa_frontier)
    return lengths + (
        req.planned,
        req.checkpoint,
        tuple(req.spare_states),
        tuple(req.own_full),
        tuple(req.own_swa),
    )


def _snapshot(sched, reqs, batch) -> tuple:
    """What an event step can move: its requests, the pools, the tree, the steps in flight, the batch read."""
    manager, tree = sched.manager, sched.manager.tree
    items = None if batch is None else tuple((item.plan, item.is_prefill) for item in batch.items)
    return (
        tuple(_request_state(req) for req in reqs),
        tuple(pool_state(pool) for pool in manager.pools.values()),
        (tree.num_full_pages, tree.num_swa_pages, tree.num_states, dict(tree.num_evictions)),
        tuple(sorted(getattr(sched.rules, "in_flight", ()))),
        items,
    )


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with every switch as given; returns its result, the log, and what it took by each fast path."""
    log: list = []
    counts = {"one_pass": 0, "pages": 0, "decode_pass": 0}

    def fits(sched, reqs, iteration):
        answer = _FITS(sched, reqs, iteration)
        entry = ("fits", iteration, tuple(req.request_id for req in reqs), answer[0])
        if not log or log[-1] != entry:  # the reference asks a run's first step twice (``_leave_running``'s)
            log.append(entry)
        return answer

    def event_step(sched, reqs, iteration, in_flight, announced, process, needs=None):
        batch = _EVENT_STEP(sched, reqs, iteration, in_flight, announced, process, needs)
        counts["one_pass"] += needs is not None
        log.append(("step", iteration, _snapshot(sched, reqs, batch)))
        return batch

    def take_pages(manager, req, num_pages):
        counts["pages"] += num_pages
        _TAKE_PAGES(manager, req, num_pages)

    def begin(manager, rules, in_flight, proved):
        counts["decode_pass"] += sglang_event_plans.DECODE_PASS and proved
        _BEGIN(manager, rules, in_flight, proved)

    patches = [mock.patch.object(sglang_event_plans, name, switch) for name in SWITCHES] + [
        mock.patch.object(sglang_runs, "step_fits_and_needs", side_effect=fits),
        mock.patch.object(sglang_fast, "step_fits_and_needs", side_effect=fits),
        mock.patch.object(sglang_runs, "_event_step", side_effect=event_step),
        mock.patch.object(sglang_event_plans, "take_anonymous_pages", side_effect=take_pages),
        mock.patch.object(sglang_event_plans, "begin_decode_pass", side_effect=begin),
    ]
    return simulate_patched(trace, config, patches), log, counts


def one_pass(trace: Trace, config: SimConfig) -> dict:
    """Both runs, asserted equal step by step and table by table; returns the switch-on run's fast counts."""
    return logged_on_against_off(_logged_run, trace, config)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sglang_bursts())
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 1, 0, False)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), sglang_config("radix", 16, 12000, False)))
@example((Trace(growing_burst(6)), sglang_config("sglang-retain", 2, 3000, True)))
def test_one_pass_moves_what_the_reference_moves(case):
    one_pass(*case)


# floors: each fixed burst's switch-on run took at least this many event steps in one pass, pages at once and
# passes begun with the steps in flight alone (each the count seen)
FLOORS = [
    ("marconi-sglang", 1, 0, (11, 30, 6)),
    ("marconi-sglang", 2, 0, (11, 18, 6)),
    ("marconi", 1, 0, (11, 30, 6)),
    ("sglang", 1, 0, (64, 0, 7)),
    ("sglang-retain", 2, 12000, (38, 0, 9)),
    ("sglang-retain-tree", 16, 12000, (41, 0, 10)),
    ("radix", 1, 0, (5, 0, 5)),
    ("radix", 16, 0, (5, 0, 5)),
]


@pytest.mark.parametrize("policy,page,pool_tokens,floor", FLOORS)
def test_fixed_bursts_take_the_fast_paths(policy, page, pool_tokens, floor):
    for bounds in (False, True):
        counts = one_pass(Trace(growing_burst(6)), sglang_config(policy, page, pool_tokens, bounds))
        taken = (counts["one_pass"], counts["pages"], counts["decode_pass"])
        assert all(count >= least for count, least in zip(taken, floor, strict=True)), taken
