"""vLLM's scheduler in the simulator (sim/sched/vllm.py): on the hand-made concurrent scenario of
tests/vllm_concurrent_scenarios.py simulate schedules, step by step, what vLLM 0.33.0 scheduled, preempts what it
preempted and ends each request where it ended (pinned; tests/conformance runs vLLM again)."""
from __future__ import annotations

import pytest

from conformance.compare_steps import simulated_steps
from tests import vllm_concurrent_scenarios as hand


@pytest.mark.parametrize("async_scheduling", [True, False], ids=["async", "sync"])
def test_simulate_schedules_what_vllm_scheduled(async_scheduling):
    run = simulated_steps(hand.siblings(async_scheduling), "vllm")
    assert [(step.at, step.batch) for step in run.steps[:5]] == hand.FIRST_BATCHES[async_scheduling]
    assert len(run.steps) == hand.NUM_STEPS[async_scheduling]
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.PREEMPTED[async_scheduling]
    assert hand.outcomes(run.requests) == hand.OUTCOMES[async_scheduling]


def test_no_waiting_request_is_admitted_in_a_step_that_preempted():
    for async_scheduling in (True, False):
        steps = simulated_steps(hand.siblings(async_scheduling), "vllm").steps
        for before, step in zip(steps, steps[1:], strict=False):
            if step.retracted:
                newcomers = {rid for rid, _, _ in step.batch} - {rid for rid, _, _ in before.batch}
                assert not newcomers
