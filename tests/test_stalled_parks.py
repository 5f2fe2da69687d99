"""The default loop takes its parks through a stall, and the unpark they lead to, in one ``park_newest`` call
(``stalled_parks.PARKS_AT_ONCE``): with it on, every table, summary and retraction (victim, reason, count, in order)
is as with the loop scheduling again after each park (off), in the fast loop and step by step. Generated bursts as
``no-cache`` and ``radix`` (``default_loop_switches.policy_bursts``: admissions late in a pass are capped under a
page, stall, and are parked when nothing else runs; pools from tight to roomy, so requests left alone are given up
on too), bounds on and off. Each switch-on run counts the schedules it skipped, so the property is not met by
never folding."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings

from sim.sched import default, stalled_parks
from tests.default_loop_switches import burst_config, policy_bursts, switched_both_ways
from tests.test_capped_stalls import _burst

_FORMS_NOTHING = stalled_parks.forms_nothing

# the runs count through a patch of the name default.py binds, which the compiled core binds at build time
pytestmark = pytest.mark.interpreted


def parks_both_ways(trace, config, fast_path: bool) -> int:
    """The run with the switch on and off held the same; how many schedules the switch-on run skipped."""

    def counting(skipped: list[int]):
        def forms_nothing(*args) -> bool:
            nothing = _FORMS_NOTHING(*args)
            skipped[0] += nothing
            return nothing

        return mock.patch.object(default, "forms_nothing", side_effect=forms_nothing)

    on, _ = switched_both_ways((stalled_parks, "PARKS_AT_ONCE"), trace, config, fast_path, counting)
    return on[2]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(policy_bursts())
def test_parks_at_once_change_no_table_nor_retraction(drawn):
    parks_both_ways(*drawn)


@pytest.mark.parametrize("page", [2, 16])
@pytest.mark.parametrize("pool_tokens", [8000, 40000])
@pytest.mark.parametrize("fast_path", [True, False])
def test_parks_are_taken_at_once_at_each_page(page: int, pool_tokens: int, fast_path: bool):
    """A ``no-cache`` burst whose admissions late in a pass stall (a chunk budget of 2 pages, at least 32 tokens):
    some schedules are skipped, and the runs agree, in the fast loop and step by step."""
    knobs = dict(
        page_size=page, track_interval=128, chunked_prefill_size=max(page, 16) * 2, max_running_requests=12
    )
    assert parks_both_ways(_burst(), burst_config(knobs, pool_tokens, False), fast_path) > 0
