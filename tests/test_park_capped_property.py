"""The default loop's empty steps parking at once (``capped_stalls.PARK_CAPPED_AT_ONCE``): where none waits and every
running request but the newest is a first chunk no budget sizes, an empty step parks them all, newest first, as the
empty steps after it would park them one a step (each scheduling nothing: no decode, no chunk, no admission asked).
With it on, every table, summary and retraction (its order and reason) is as with one a step (the switch off), in
the fast loop and step by step, bounds on and off, on ``test_capped_stalls.py``'s generated ``no-cache`` bursts; the
fixed burst parks several at once at pages 2 and 16, so the property is not met by never doing so."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings

from sim.run.simulate import SimConfig, simulate
from sim.sched import capped_stalls
from sim.sched.capped_stalls import parked_at_once
from sim.sched.default import DefaultScheduler
from sim.sched.request import RequestState
from tests.same_runs import same_both_ways
from tests.test_capped_stalls import _burst, bursts

_RETRACT = DefaultScheduler._retract
_PARK = DefaultScheduler.park_newest

# the runs count through patches of DefaultScheduler's methods, which the compiled core binds
pytestmark = pytest.mark.interpreted


def parked_run(trace, config: SimConfig, fast_path: bool, at_once: bool):
    """The run's retractions with their reasons (the log), its result, and how many empty steps parked several."""
    retracted: list[tuple[str, str]] = []
    several = [0]

    def retract(scheduler: DefaultScheduler, victim, why: str) -> None:
        retracted.append((victim.request_id, why))
        _RETRACT(scheduler, victim, why)

    def park(scheduler: DefaultScheduler) -> bool:
        running = len(scheduler.running)
        parked = _PARK(scheduler)
        several[0] += running - len(scheduler.running) > 1
        return parked

    with (
        mock.patch.object(capped_stalls, "PARK_CAPPED_AT_ONCE", at_once),
        mock.patch.object(DefaultScheduler, "_retract", autospec=True, side_effect=retract),
        mock.patch.object(DefaultScheduler, "park_newest", autospec=True, side_effect=park),
    ):
        result = simulate(trace, config, fast_path=fast_path)
    return retracted, result, several[0]


def parks_alike(trace, knobs: dict, pool_tokens: int, bounds: bool) -> int:
    """Both ways alike, in the fast loop and step by step; the empty steps that parked several (fast loop)."""
    config = SimConfig(
        policy="no-cache",
        model="inkling",
        knobs=knobs,
        pool_tokens=pool_tokens,
        mamba_states=48,
        bounds=bounds,
    )
    several = 0
    for fast_path in (True, False):
        on, _ = same_both_ways(lambda at_once, fast=fast_path: parked_run(trace, config, fast, at_once))
        several += on[2] if fast_path else 0
    return several


@settings(max_examples=15, deadline=None, derandomize=True)
@given(bursts())
def test_parking_at_once_changes_no_table_nor_retraction(burst):
    parks_alike(*burst)


@pytest.mark.parametrize("page", [2, 16])
@pytest.mark.parametrize("bounds", [False, True])
def test_the_burst_parks_several_at_once(page: int, bounds: bool):
    """The fixed burst (a chunk budget of 2 pages, at least 32 tokens: admissions late in a pass stall until parked)
    parks several at once (page 2: once; page 16: 3 times) and changes nothing."""
    knobs = dict(
        page_size=page, track_interval=128, chunked_prefill_size=max(page, 16) * 2, max_running_requests=12
    )
    assert parks_alike(_burst(), knobs, 40000, bounds) > 0


class _Memo:
    """A ``CappedStalls`` that answers from a set: the requests that stall whatever the pass."""

    def __init__(self, stalled: set[str]):
        self.stalled = stalled

    def holds(self, request_id: str) -> bool:
        return request_id in self.stalled


def _running(num: int) -> dict[str, RequestState]:
    running = {}
    for order in range(num):
        state = RequestState(f"r{order}", None, 100, 10, None, admission_order=order)
        running[state.request_id] = state
    return running


@pytest.mark.parametrize("at_once", [True, False])
def test_only_a_stall_of_all_the_rest_with_none_waiting_parks_them_at_once(at_once: bool):
    """The guards the traces above rarely reach: one request waiting, or one of the rest not held, parks the newest
    alone; else all go, newest first (with the switch on)."""
    running = _running(4)
    newest, every = running["r3"], {"r0", "r1", "r2"}
    with mock.patch.object(capped_stalls, "PARK_CAPPED_AT_ONCE", at_once):
        assert parked_at_once(_Memo(every), newest, running, False) == [newest]
        assert parked_at_once(_Memo(every - {"r1"}), newest, running, True) == [newest]
        all_at_once = [running[f"r{order}"] for order in (3, 2, 1, 0)]
        assert parked_at_once(_Memo(every), newest, running, True) == (all_at_once if at_once else [newest])
