"""The default loop takes its parks through a stall, and the unpark they lead to, in one ``park_newest`` call
(``stalled_parks.PARKS_AT_ONCE``): with it on, every table, summary and retraction (victim, reason, count, in order)
is as with the loop scheduling again after each park (off), in the fast loop and step by step. Generated bursts as
``no-cache`` and ``radix`` (``default_loop_switches.policy_bursts``: admissions late in a pass are capped under a
page, stall, and are parked when nothing else runs; pools from tight to roomy, so requests left alone are given up
on too), bounds on and off. Each switch-on run counts the schedules it skipped, so the property is not met by
never folding."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import cast
from unittest import mock

import pytest
from hypothesis import given, settings

from sim.cache.manager import CacheManager
from sim.sched import default, stalled_parks
from sim.sched.capped_stalls import CappedStalls
from sim.sched.request import RequestState
from sim.sched.stalled_parks import forms_nothing
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


def _stall(told: list[int], kv_lens: list[int], waiting: int = 0, parked: int = 0):
    """``forms_nothing``'s arguments: running requests of 100-token prompts at ``kv_lens``, the ``told`` ones
    told, and so many waiting and parked (a stand-in manager: it reads only ``requests``)."""
    states = [RequestState(f"r{i}", None, 100, 10, None) for i in range(len(kv_lens) + waiting + parked)]
    requests = {
        s.request_id: SimpleNamespace(kv_len=kv)
        for s, kv in zip(states[: len(kv_lens)], kv_lens, strict=True)
    }
    capped = CappedStalls(cast(CacheManager, SimpleNamespace(requests=requests)))
    capped.told.update(f"r{i}" for i in told)
    running = {s.request_id: s for s in states[: len(kv_lens)]}
    rest = states[len(kv_lens) :]
    return capped, running, deque(rest[:waiting]), rest[waiting:]


def test_forms_nothing_only_where_every_running_request_is_told_in_its_prompt_and_none_waits():
    assert forms_nothing(*_stall([0, 1, 2], [0, 0, 0]))
    assert forms_nothing(*_stall([], [], parked=2))  # none left running: the loop's schedule unparks
    assert not forms_nothing(*_stall([0, 1, 2], [0, 0, 0], waiting=1))  # the head may be admitted
    assert not forms_nothing(*_stall([0, 2], [0, 0, 0]))  # r1's chunk is asked again
    assert not forms_nothing(*_stall([0, 1, 2], [0, 100, 0]))  # r1 decodes
    assert not forms_nothing(*_stall([1, 2], [0, 0, 0]))  # the first one untold
    assert not forms_nothing(*_stall([], [0]))  # one running, untold: its chunk is asked again
    assert not forms_nothing(*_stall([], []))  # no work: the loop sleeps
    assert not forms_nothing(CappedStalls(None), {}, deque(), [])  # not the radix manager: never
