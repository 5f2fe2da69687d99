"""The default loop leaves out a capped first chunk whose stall it already recorded (``CappedStalls.told``, switch
``capped_stalls.SKIP_TOLD``): with it on, every table, summary and retraction (its reason, which the stall wrote,
included) is as with every step asking the memo and rewriting the reason (off), in the fast loop and step by
step. Generated ``no-cache`` bursts at pages 1/2/16/64 with small chunk budgets (an admission late in a pass is
capped under a page and stalls until the loop parks it, then is admitted again) on pools from tight to roomy,
so the cap closes and reopens; bounds on and off. Each switch-on run counts the stalls it told, so the property is
not met by never telling."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings

from sim.sched import capped_stalls
from sim.sched.capped_stalls import CappedStalls
from tests.default_loop_switches import burst_config, switched_both_ways
from tests.test_capped_stalls import _burst, bursts

_TELL = CappedStalls.tell

# the runs count through patches of CappedStalls.tell and DefaultScheduler._retract, which the compiled core binds
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


def told_both_ways(trace, knobs: dict, pool_tokens: int, bounds: bool, fast_path: bool) -> int:
    """The run with the switch on and off held the same (retractions and their reasons as the log); how many
    stalls the switch-on run told."""
    config = burst_config(knobs, pool_tokens, bounds)

    def counting(told: list[int]):
        def tell(memo: CappedStalls, request_id: str, budget: int) -> None:
            told[0] += request_id not in memo.told and budget > 0
            _TELL(memo, request_id, budget)

        return mock.patch.object(CappedStalls, "tell", autospec=True, side_effect=tell)

    on, _ = switched_both_ways((capped_stalls, "SKIP_TOLD"), trace, config, fast_path, counting)
    return on[2]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(bursts())
def test_told_stalls_change_no_table_nor_retraction(burst):
    trace, knobs, pool_tokens, bounds = burst
    told_both_ways(trace, knobs, pool_tokens, bounds, fast_path=True)


@pytest.mark.parametrize("page", [2, 16, 64])
@pytest.mark.parametrize("fast_path", [True, False])
def test_told_stalls_are_left_out_at_each_page(page: int, fast_path: bool):
    """A burst whose admissions late in a pass stall (a chunk budget of 3 pages): stalls are told, and the runs
    agree, in the fast loop and step by step."""
    knobs = dict(
        page_size=page, track_interval=128, chunked_prefill_size=max(page, 16) * 3, max_running_requests=12
    )
    assert told_both_ways(_burst(), knobs, 40000, False, fast_path) > 0


def test_a_forgotten_request_is_told_no_more():
    """Retracted (or parked), a request leaves the told set with the memo: admitted again, it is a new cache."""
    memo = CappedStalls(None)
    memo.tell("r1", 5)
    memo.tell("r2", 0)  # no chunk tokens left: no reason written, nothing told
    assert memo.told == {"r1"} or not capped_stalls.SKIP_TOLD
    memo.forget("r1")
    assert memo.told == set()
