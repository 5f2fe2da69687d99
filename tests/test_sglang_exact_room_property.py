"""SGLang's batch runs take the steps the loop's full step takes without evicting (``sim/sched/sglang_room.py``,
``sim/cache/step_room.py``: ``EXACT_ROOM``), not only those that keep a page per request and the slack free
past them (off: the reference). Generated bursts on the presets of SGLang's loop at pages 1, 2 and 16, pools
from a few pages over the burst's need to roomy, the overlap loop and the plain one, bounds on and off (the
bounds read each full step's batch: the summary holds their figures): both runs' request and step tables and
summaries equal, and the same evictions, pools and tree at the end. Fixed tight bursts put a floor on the full
steps the switch-on run left out."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from sglang_event_steps import POLICIES, pool_state

from sim.cache import step_room
from sim.run.simulate import SimConfig, simulate
from sim.sched import sglang_room
from sim.sched.sglang import SGLangScheduler
from sim.trace import Trace
from tests.fast_slow_helpers import burst_requests, growing_burst

# the full steps are counted through a patch the compiled core would not see
pytestmark = pytest.mark.interpreted

_POSTPROCESS = SGLangScheduler.postprocess


def _config(policy: str, page: int, pool_tokens: int, overlap: bool, bounds: bool) -> SimConfig:
    knobs: dict = dict(page_size=page, track_interval=max(page, 16) * 4, overlap=overlap)
    pools = dict(pool_tokens=pool_tokens, mamba_states=48) if pool_tokens else {}
    model = "qwen3-next" if policy == "radix" else "inkling"
    return SimConfig(policy=policy, model=model, knobs=knobs, bounds=bounds, **pools)


def _run(trace: Trace, config: SimConfig, switch: bool) -> tuple:
    """The run with ``EXACT_ROOM`` as given: what it leaves (evictions, pools, tree), its result, its full steps."""
    seen: dict = {}
    full_steps = {"count": 0}

    def postprocess(sched, batch):
        full_steps["count"] += 1
        seen["manager"] = sched.manager
        return _POSTPROCESS(sched, batch)

    with (
        mock.patch.object(sglang_room, "EXACT_ROOM", switch),
        mock.patch.object(SGLangScheduler, "postprocess", autospec=True, side_effect=postprocess),
    ):
        result = simulate(trace, config)
    manager = seen["manager"]
    tree = manager.tree
    left = (
        dict(tree.num_evictions),
        (tree.num_full_pages, tree.num_swa_pages, tree.num_states),
        tuple(pool_state(pool) for pool in manager.pools.values()),
    )
    return left, result, full_steps["count"]


@st.composite
def tight_bursts(draw):
    """A burst of 2 to 8 requests on one of SGLang's loop presets, pages 1, 2 or 16, pools from tight to roomy."""
    requests = burst_requests(draw, draw(st.integers(2, 8)), 1500, 600, 300)
    policy, page = draw(st.sampled_from(POLICIES)), draw(st.sampled_from([1, 2, 16]))
    longest = max(sum(s.len for s in r.prompt) + r.output_len for r in requests)
    pool_tokens = draw(st.sampled_from([0, longest + 64, longest + 400, 2 * longest, 4000]))
    config = _config(policy, page, pool_tokens, draw(st.booleans()), draw(st.booleans()))
    return Trace(sorted(requests, key=lambda r: r.arrival)), config


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=tight_bursts())
@example(case=(Trace(growing_burst(6)), _config("radix", 16, 3000, True, False)))
@example(case=(Trace(growing_burst(6)), _config("marconi-sglang", 2, 3000, True, True)))
@example(case=(Trace(growing_burst(6)), _config("sglang", 1, 3000, False, False)))
def test_exact_room_runs_as_the_reference(case):
    trace, config = case
    same_both_ways(lambda switch: _run(trace, config, switch))


# fixed tight bursts: the switch-on run took at least this many of the reference's full steps into its runs
# (each the count seen)
FLOORS = [("radix", 16, 16000, 5), ("radix", 1, 12000, 2), ("sglang", 16, 12000, 14), ("marconi-sglang", 16, 16000, 5)]


@pytest.mark.parametrize("policy,page,pool_tokens,floor", FLOORS)
def test_tight_bursts_take_more_steps_in_runs(policy, page, pool_tokens, floor):
    for bounds in (False, True):
        config = _config(policy, page, pool_tokens, True, bounds)
        on, off = same_both_ways(lambda switch: _run(Trace(growing_burst(8)), config, switch))
        assert off[2] - on[2] >= floor, (on[2], off[2])


def _fitting_step_by_step(starts, steps, free, num_reqs, slack):
    """The oracle of ``step_room``: step by step, a step fits where the pages started before it leave a page per
    request free and with its own pages the slack; the steps before the first that does not, with their starts."""
    for step in range(steps):
        before = sum(1 for offset, _ in starts if offset < step)
        own = sum(1 for offset, _ in starts if offset == step)
        if free - before < num_reqs or free - before - own < slack:
            return step, [start for start in starts if start[0] < step]
    return steps, starts


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    steps=st.integers(1, 30),
    num_reqs=st.integers(1, 6),
    slack=st.integers(0, 2),
    extra=st.integers(0, 40),
    picks=st.sets(st.tuples(st.integers(0, 29), st.integers(0, 5)), max_size=60),
)
def test_room_cut_as_step_by_step(steps, num_reqs, slack, extra, picks):
    starts = sorted((offset, index) for offset, index in picks if offset < steps and index < num_reqs)
    free = max(num_reqs, slack) + extra
    before_cap, through_cap = free - num_reqs, free - slack
    assert step_room.room_fitting_starts(starts, steps, before_cap, through_cap) == _fitting_step_by_step(
        starts, steps, free, num_reqs, slack
    )
    lockstep = [(offset, index) for offset in range(steps) for index in range(num_reqs)]
    assert step_room.lockstep_fitting_steps(steps, free, num_reqs, slack) == _fitting_step_by_step(
        lockstep, steps, free, num_reqs, slack
    )[0]
