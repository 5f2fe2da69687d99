"""The default loop reads its running requests in admission order from the dict itself (``running_order``, switch
``IN_ADMISSION_ORDER``): with it on, every table, summary and retraction (victim, reason, count) is as with every
step sorting them by ``admission_order`` (off), in the fast loop and step by step. Generated ``no-cache`` and
``radix`` bursts on pools from tight to roomy (decodes refused, the newest retracted, parked and admitted again,
so requests leave the dict from anywhere and come back at its end), bounds on and off; and the two readings of a
dict held equal under random admissions and removals."""

from __future__ import annotations

import itertools
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.simulate import SimConfig
from sim.sched import running_order
from sim.sched.request import RequestState
from sim.sched.running_order import newest_of, oldest_first
from tests.default_loop_switches import burst_config, policy_bursts, switched_both_ways
from tests.test_capped_stalls import _burst

# the runs log through a patch of DefaultScheduler._retract, which the compiled core binds
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


def ordered_both_ways(trace, config: SimConfig, fast_path: bool) -> int:
    """The run with the switch on and off held the same (retractions as the log); how many it retracted."""
    on, _ = switched_both_ways((running_order, "IN_ADMISSION_ORDER"), trace, config, fast_path)
    return len(on[0])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(policy_bursts())
def test_running_order_changes_no_table_nor_retraction(run):
    ordered_both_ways(*run)


@pytest.mark.parametrize("fast_path", [True, False])
def test_running_order_under_retractions(fast_path: bool):
    """A ``no-cache`` burst whose capped first chunks stall: the newest running request is retracted and parked
    again and again (7 times), and the runs agree."""
    knobs = dict(page_size=16, track_interval=128, chunked_prefill_size=48, max_running_requests=12)
    config = burst_config(knobs, 16000, False)
    assert ordered_both_ways(_burst(), config, fast_path) > 0


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 20)), max_size=60))
def test_a_dict_filled_in_admission_order_reads_sorted(moves):
    """Admissions (a new number, at the end; a removed id may come back) and removals from anywhere: the dict read
    as it stands is the sorted reading, and its last value the newest."""
    counter, running = itertools.count(), {}
    for admit, pick in moves:
        if admit:
            state = RequestState(f"r{pick}", None, 1, 1, None)
            if state.request_id in running:
                continue
            state.admission_order = next(counter)
            running[state.request_id] = state
        elif running:
            del running[list(running)[pick % len(running)]]
        with mock.patch.object(running_order, "IN_ADMISSION_ORDER", False):
            sorted_states, newest = oldest_first(running), newest_of(running)
        assert oldest_first(running) == sorted_states
        assert newest_of(running) is newest
