"""An SGLang batch run's event step gives a request whose step only starts a page its page alone
(``sim/sched/sglang_runs.py``'s ``PAGE_ONLY_AT_ONCE``: ``CacheManager.prepare_page_decode``) instead of the
rules' ``prepare_decode``: under the room ``event_step_fits`` checked, that rule's refusal, out-of-window free,
eviction ahead and reservation do nothing there.

Each case runs twice, the switch on and off, and logs, after every plan of an event step's request that takes a
checkpoint, fires its SWA free or starts a page (those that only start a page among them), the request (lengths,
pages, frontier, planned and taken checkpoints, spare states), every pool (free count and the ids it would hand
out next), the tree (pages, states, evictions) and the plan: the two logs must be equal entry by entry (the fast
path against the plain rule, call by call), and the two runs' tables and summaries equal. Generated bursts on the
presets of SGLang's loop at pages 1, 2 and 16, tight and roomy pools, bounds on and off; fixed bursts put a floor
on the calls the switch-on run took by the fast path, counted in its own run."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from sglang_event_steps import assert_logged_runs_equal, pool_state, sglang_bursts, sglang_config

from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_event_plans, sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import growing_burst

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

_DECODE_PLAN = sglang_event_plans.decode_plan


def _snapshot(manager, req, plan) -> tuple:
    """What a step's plan can move: the request's own state, the pools, the tree, and the plan."""
    tree = manager.tree
    return (
        (req.request_id, req.kv_len, req.swa_frontier, req.planned, req.checkpoint, tuple(req.spare_states)),
        (tuple(req.own_full), tuple(req.own_swa)),
        tuple(pool_state(pool) for pool in manager.pools.values()),
        (tree.num_full_pages, tree.num_swa_pages, tree.num_states, dict(tree.num_evictions)),
        plan,
    )


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with the switch as given; returns its result, the log after every plan of an event step's
    request that takes a checkpoint, fires its SWA free or starts a page, and how many the fast path took."""
    log: list[tuple] = []
    counts = {"fast": 0}

    def logged(manager, req, iteration, pages_alone, wanted):
        plan = _DECODE_PLAN(manager, req, iteration, pages_alone, wanted)
        counts["fast"] += bool(pages_alone)
        log.append(_snapshot(manager, req, plan if wanted else None))
        return plan

    # anonymous pools' page-only pages counted out at once would take no plan to log (its own test)
    with mock.patch.object(sglang_runs, "PAGE_ONLY_AT_ONCE", switch):
        with mock.patch.object(sglang_event_plans, "PAGES_AT_ONCE", False):
            with mock.patch.object(sglang_event_plans, "decode_plan", side_effect=logged):
                result = simulate(trace, config)
    return result, log, counts["fast"]


def pages_alone(trace: Trace, config: SimConfig) -> int:
    """Both runs, asserted equal call by call and table by table; returns the switch-on run's fast calls."""
    fast, fast_log, num_fast = _logged_run(trace, config, True)
    reference, reference_log, num_reference = _logged_run(trace, config, False)
    assert num_reference == 0
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return num_fast


@settings(max_examples=40, deadline=None, derandomize=True)
@given(sglang_bursts())
@example((Trace(growing_burst(6)), sglang_config("marconi-sglang", 1, 0, False)))
@example((Trace(growing_burst(6)), sglang_config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), sglang_config("radix", 16, 12000, False)))
def test_pages_alone_move_what_prepare_decode_moves(case):
    pages_alone(*case)


# floors: each fixed burst's switch-on run took at least this many pages alone
FLOORS = [
    ("marconi-sglang", 1, 0, 30),
    ("marconi-sglang", 2, 0, 18),
    ("marconi", 1, 0, 30),
    ("sglang", 1, 0, 241),
    ("sglang-retain", 2, 12000, 41),
    ("sglang-retain-tree", 16, 12000, 16),
    ("radix", 1, 0, 15),
    ("radix", 16, 0, 2),
]


@pytest.mark.parametrize("policy,page,pool_tokens,floor", FLOORS)
def test_fixed_bursts_take_pages_alone(policy, page, pool_tokens, floor):
    for bounds in (False, True):
        assert pages_alone(Trace(growing_burst(6)), sglang_config(policy, page, pool_tokens, bounds)) >= floor
