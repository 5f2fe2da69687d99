"""``no-cache``'s batch-run event steps through the shortcuts proved for SGLang's rules (``sim/sched/sglang_runs.py``'s
``NULL_RULES_PROVED``: the null rules join ``PAGE_ONLY_RULES``, so an event step is read in one pass, its page-only
requests get their pages alone and its run's pass is begun with the steps in flight alone) against the reference
(off: ``event_step_fits``, a ``prepare_decode`` for every request that fires its SWA free or starts a page, and
``manager.begin_pass``).

Each case runs with the switch on and off and logs, after every event step, each of its requests (lengths, decode
steps, frontier, planned and taken checkpoints, spare states, own FULL and SWA pages), every pool (free count,
high water, the ids it hands out next), the tree, the steps in flight the rules hold and the batch where the
bounds read it: the two logs must be equal entry by entry, and the two runs' tables and summaries equal.
Generated bursts on both models (SWA with and without MAMBA), pages 1, 2 and 16, tight and roomy pools, the
overlap loop on and off, bounds on and off; fixed bursts put a floor on the event steps the switch-on run read in
one pass."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_event_steps import assert_logged_runs_equal, pool_state

from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_runs
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

# the calls go through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

_EVENT_STEP = sglang_runs._event_step


def null_config(model: str, page: int, pool_tokens: int, overlap: bool, bounds: bool) -> SimConfig:
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4, overlap=overlap)
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}
    return SimConfig(policy="no-cache", model=model, knobs=knobs, bounds=bounds, **pools)


@st.composite
def null_bursts(draw):
    """A burst of 2 to 10 requests on ``no-cache``, either model, pages 1, 2 or 16, tight or roomy pools."""
    requests = burst_requests(draw, draw(st.integers(2, 10)), 2000, 700, 400)
    model, page = draw(st.sampled_from(["inkling", "qwen3-next"])), draw(st.sampled_from([1, 2, 16]))
    pool_tokens = draw(st.sampled_from([0, 3000, 12000]))
    config = null_config(model, page, pool_tokens, draw(st.booleans()), draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


def _snapshot(sched, reqs, batch) -> tuple:
    """What an event step can move: its requests, the pools, the tree, the steps in flight, the batch read."""
    manager, tree = sched.manager, sched.manager.tree
    requests = tuple(
        (req.request_id, req.kv_len, req.decode_steps, req.swa_frontier, req.planned, req.checkpoint)
        + (tuple(req.spare_states), tuple(req.own_full), tuple(req.own_swa))
        for req in reqs
    )
    items = None if batch is None else tuple((item.plan, item.is_prefill) for item in batch.items)
    pools = tuple(pool_state(pool) for pool in manager.pools.values())
    trees = (tree.num_full_pages, tree.num_swa_pages, tree.num_states, dict(tree.num_evictions))
    return requests, pools, trees, tuple(sorted(sched.rules.in_flight)), items


def _logged_run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with the switch as given; its result, the log, and the event steps read in one pass."""
    log: list = []
    counts = {"one_pass": 0}

    def event_step(sched, reqs, iteration, in_flight, announced, process, needs=None):
        batch = _EVENT_STEP(sched, reqs, iteration, in_flight, announced, process, needs)
        counts["one_pass"] += needs is not None
        log.append((iteration, _snapshot(sched, reqs, batch)))
        return batch

    with mock.patch.object(sglang_runs, "NULL_RULES_PROVED", switch):
        with mock.patch.object(sglang_runs, "_event_step", side_effect=event_step):
            result = simulate(trace, config)
    return result, log, counts["one_pass"]


def null_rules_proved(trace: Trace, config: SimConfig) -> int:
    """Both runs, asserted equal step by step and table by table; the switch-on run's steps read in one pass."""
    fast, fast_log, num_fast = _logged_run(trace, config, True)
    reference, reference_log, num_reference = _logged_run(trace, config, False)
    assert num_reference == 0
    assert_logged_runs_equal((fast, fast_log), (reference, reference_log))
    return num_fast


@settings(max_examples=40, deadline=None, derandomize=True)
@given(null_bursts())
@example((Trace(growing_burst(6)), null_config("inkling", 1, 0, True, True)))
@example((Trace(growing_burst(6)), null_config("qwen3-next", 16, 3000, False, False)))
def test_null_rules_event_steps_move_what_the_reference_moves(case):
    null_rules_proved(*case)


# floors: each fixed burst's switch-on run read at least this many event steps in one pass (the count seen)
FLOORS = [
    ("inkling", 1, 0, True, 83),
    ("inkling", 2, 12000, False, 17),
    ("inkling", 16, 3000, True, 13),
    ("qwen3-next", 1, 0, True, 5),
]


@pytest.mark.parametrize("model,page,pool_tokens,overlap,floor", FLOORS)
def test_fixed_bursts_take_the_proved_shortcuts(model, page, pool_tokens, overlap, floor):
    for bounds in (False, True):
        config = null_config(model, page, pool_tokens, overlap, bounds)
        assert null_rules_proved(Trace(growing_burst(6)), config) >= floor
