"""FreeToken's scheduler in the simulator (sim/sched/freetoken.py): on the hand-made concurrent scenario of
tests/freetoken_concurrent_scenarios.py simulate launches, step by step, the batches FreeToken 0.2.1 launched,
with its pools after each step and its outcomes (pinned; tests/conformance runs the engine again)."""

from __future__ import annotations

import pytest

from conformance.compare_steps import simulated_steps
from tests import freetoken_concurrent_scenarios as hand


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "plain-loop"])
def test_simulate_launches_what_freetoken_launched(overlap):
    run = simulated_steps(hand.siblings(overlap), "freetoken")
    assert [(step.at, step.batch) for step in run.steps] == hand.BATCHES[overlap]
    pools = {step.at: step.pools for step in run.steps}
    for at, expected in hand.POOLS[overlap].items():
        assert pools[at] == expected
    assert hand.outcomes(run.requests) == hand.OUTCOMES[overlap]


def test_the_table_rows_bound_the_running_requests():
    # e arrives with the others but only gets a row once b and d have finished and were processed
    run = simulated_steps(hand.siblings(True), "freetoken")
    first = {
        name: min(s.at for s in run.steps if any(item[0] == name for item in s.batch)) for name in "abcdef"
    }
    assert first["e"] > max(first[name] for name in "abcd")
    assert max(len({item[0] for item in s.batch}) for s in run.steps) <= 4


def test_a_batch_is_all_prefill_or_all_decode():
    for overlap in (True, False):
        for step in simulated_steps(hand.siblings(overlap), "freetoken").steps:
            assert len({prefill for _, _, prefill in step.batch}) == 1


def test_the_plain_loop_releases_a_request_done_at_its_prompt_before_the_next_commits():
    # tests/freetoken_concurrent_scenarios.py: done_first (FreeToken's answers; simulate committed r2's prompt
    # before r1's finish and kept 215 SWA pages in the tree after step 2, not 411)
    run = simulated_steps(hand.done_first(), "freetoken")
    pools = {step.at: step.pools for step in run.steps}
    assert {at: pools[at] for at in hand.DONE_FIRST_POOLS} == hand.DONE_FIRST_POOLS
    assert hand.outcomes(run.requests) == hand.DONE_FIRST_OUTCOMES
