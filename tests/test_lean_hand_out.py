"""A freeing stretch's lean hand-out (``swa_free_runs.LEAN_HAND_OUT``, ``sim/cache/swa_hand_out.py``): the
stretch's FULL ids counted out at once, a turn with no page start before it calls nothing, the starts before a
turn found by bisection, a lone start's page given to its request directly. As a
property over ``tests/test_swa_free_runs.py``'s generated ``no-cache`` bursts (stretches on), every id each pool
hands out, in order, every ``SwaFreed`` event and the tables are those with the switch off (``_allocate_before``
at every turn); the fixed bursts take lone starts and many-start hand-outs both, so the property is not met by
never taking the lean path."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from same_runs import same_both_ways
from test_swa_free_runs import PAGE_16_ITERATIONS, PAGE_64, STRETCH_RUNS, bursts, run_logged

from sim.cache import swa_free_runs

LONE, MANY = [0], [0]
HAND_OUT = swa_free_runs.hand_out_before  # before any patch


def counted_hand_out(manager, reqs, starts, full_ids, allocated, before):
    end = HAND_OUT(manager, reqs, starts, full_ids, allocated, before)
    (LONE if end - allocated == 1 else MANY)[0] += 1
    return end


def run_lean(burst, lean: bool, monkeypatch) -> tuple:
    monkeypatch.setattr(swa_free_runs, "LEAN_HAND_OUT", lean)
    monkeypatch.setattr(swa_free_runs, "hand_out_before", counted_hand_out)
    return run_logged(burst, True, monkeypatch)


@pytest.mark.interpreted  # patches Pool.alloc and module flags, which the compiled core binds
@STRETCH_RUNS
@given(burst=bursts())
@example(burst=PAGE_64)
@example(burst=PAGE_16_ITERATIONS)
def test_lean_hand_out_leaves_pools_events_and_tables_as_the_reference(burst, monkeypatch):
    same_both_ways(lambda lean: run_lean(burst, lean, monkeypatch))


@pytest.mark.interpreted
@pytest.mark.parametrize("burst", [PAGE_64, PAGE_16_ITERATIONS])
def test_the_fixed_bursts_hand_out_lone_and_many_starts(burst, monkeypatch):
    LONE[0] = MANY[0] = 0
    run_lean(burst, True, monkeypatch)
    assert LONE[0] > 0 and MANY[0] > 0  # 21 and 8 at page 64, 4 and 35 at page 16
