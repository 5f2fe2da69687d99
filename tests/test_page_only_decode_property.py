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
from hypothesis import strategies as st
from same_runs import assert_same_run

from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_event_plans, sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

POLICIES = ["radix", "sglang", "sglang-retain", "sglang-retain-tree", "marconi-sglang", "marconi"]
_DECODE_PLAN = sglang_event_plans.decode_plan


def _config(policy: str, page: int, pool_tokens: int, bounds: bool) -> SimConfig:
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4)
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}
    model = "qwen3-next" if policy == "radix" else "inkling"
    return SimConfig(policy=policy, model=model, knobs=knobs, bounds=bounds, **pools)


def _pool_state(pool) -> tuple:
    return (
        pool.num_free,
        pool.high_water,
        pool._num_returned,
        tuple(map(tuple, pool._lists)),
        tuple(pool._firsts),
    )


def _snapshot(manager, req, plan) -> tuple:
    """What a step's plan can move: the request's own state, the pools, the tree, and the plan."""
    tree = manager.tree
    return (
        (req.request_id, req.kv_len, req.swa_frontier, req.planned, req.checkpoint, tuple(req.spare_states)),
        (tuple(req.own_full), tuple(req.own_swa)),
        tuple(_pool_state(pool) for pool in manager.pools.values()),
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
    assert len(fast_log) == len(reference_log)
    for fast_entry, reference_entry in zip(fast_log, reference_log, strict=True):
        assert fast_entry == reference_entry
    assert_same_run(fast, reference)
    return num_fast


@st.composite
def bursts(draw):
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    policy, page = draw(st.sampled_from(POLICIES)), draw(st.sampled_from([1, 2, 16]))
    pool_tokens = draw(st.sampled_from([0, 3000, 12000]))
    config = _config(policy, page, pool_tokens, draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
@example((Trace(growing_burst(6)), _config("marconi-sglang", 1, 0, False)))
@example((Trace(growing_burst(6)), _config("sglang", 1, 0, True)))
@example((Trace(growing_burst(6)), _config("radix", 16, 12000, False)))
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
        assert pages_alone(Trace(growing_burst(6)), _config(policy, page, pool_tokens, bounds)) >= floor
