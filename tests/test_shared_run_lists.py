"""A stretch's page runs' batches sharing one list of ids and one of states (``batch.SHARED_RUN_LISTS``,
``runs_with_batches``): the bounds' recorder is handed the same batches (iteration, steps, each item's request,
tokens and state), in the same order, as where each run's batch reads them again (the reference), and its event
log, the tables and the summary are equal; over generated ``no-cache`` bursts (freeing stretches under the
bounds, their room cuts and event steps between) and the fixed ones, which hold a floor: runs that shared."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from same_runs import same_both_ways
from test_swa_free_runs import STRETCH_RUNS
from test_swa_free_runs_bounds import FIXED, ROOM_CUT, bursts, run_recorded

from sim.sched import batch

SWITCH = (batch, "SHARED_RUN_LISTS")


@pytest.mark.interpreted  # patches module flags and methods the compiled core binds
@STRETCH_RUNS
@given(burst=bursts())
@example(burst=ROOM_CUT)
def test_shared_lists_hand_the_bounds_the_same_batches(burst, monkeypatch):
    same_both_ways(lambda on: run_recorded(burst, on, monkeypatch, SWITCH))


@pytest.mark.interpreted
def test_fixed_bursts_share_their_runs_lists(monkeypatch):
    shared = {"runs": 0}
    made = batch.runs_with_batches

    def counted(runs, reqs, lengths, iteration, done):
        full_steps = made(runs, reqs, lengths, iteration, done)
        batches = [step.batch for step in full_steps if step.batch is not None]
        if batch.SHARED_RUN_LISTS:
            shared["runs"] += sum(b.request_ids is batches[0].request_ids for b in batches[1:])
        return full_steps

    for module in ("sim.sched.freeing_runs", "sim.sched.batch"):
        monkeypatch.setattr(f"{module}.runs_with_batches", counted)
    for burst in FIXED:
        same_both_ways(lambda on, burst=burst: run_recorded(burst, on, monkeypatch, SWITCH))
    assert shared["runs"] > 40, shared
