"""SGLang's scheduler in the simulator (sim/sched/sglang.py): on the hand-made concurrent scenario of
tests/sglang_concurrent_scenarios.py simulate schedules, step by step, what SGLang 0.5.23 scheduled, retracts what
it retracted, keeps the rest in retract_decode's keep order and ends each request where it ended (pinned;
tests/conformance runs SGLang again)."""
from __future__ import annotations

import pytest

from conformance.compare_steps import simulated_steps
from tests import sglang_concurrent_scenarios as hand


def test_simulate_schedules_what_sglang_scheduled():
    run = simulated_steps(hand.siblings(), "sglang")
    assert [(step.at, step.batch) for step in run.steps[:5]] == hand.FIRST_BATCHES
    assert len(run.steps) == hand.NUM_STEPS
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.RETRACTED
    assert [(step.at, step.batch) for step in run.steps if step.at in (37, 38)] == hand.AFTER_RETRACTION
    assert hand.outcomes(run.requests) == hand.OUTCOMES


def test_a_batch_is_all_prefill_or_all_decode():
    # SGLang's default loop runs no mixed chunk: a step extends or decodes, never both
    for step in simulated_steps(hand.siblings(), "sglang").steps:
        assert len({prefill for _, _, prefill in step.batch}) == 1


def test_the_plain_loop_commits_a_middle_chunk_at_the_next_scheduling():
    # --disable-overlap-schedule: stash_chunked_request commits a middle chunk when the next step is scheduled,
    # so the tree holds nothing after the first chunk; the last chunk is committed as its result is processed
    run = simulated_steps(hand.chunked_plain_loop(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == hand.PLAIN_LOOP_STEPS
    assert hand.outcomes(run.requests) == hand.PLAIN_LOOP_OUTCOMES


@pytest.mark.parametrize("schedule_policy", ["fcfs", "lpm", "lof"])
def test_the_schedule_policy_orders_the_waiting_queue_as_sglang_does(schedule_policy):
    # calc_priority: FCFS keeps arrival order; LPM the longest tree match first and x2 behind x1 (in-batch
    # prefix caching); LOF the longest output first. The first three steps are a's chunks in every policy.
    run = simulated_steps(hand.queued(schedule_policy), "sglang")
    prefills = [(step.at, step.batch) for step in run.steps if step.batch[0][2] and step.at >= 3]
    assert prefills == hand.QUEUED_PREFILLS[schedule_policy]
    assert hand.outcomes(run.requests) == hand.QUEUED_OUTCOMES[schedule_policy]


def test_an_unmodelled_schedule_policy_is_refused_by_name():
    with pytest.raises(ValueError, match="schedule_policy"):
        simulated_steps(hand.queued("dfs-weight"), "sglang")
