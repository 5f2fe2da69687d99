"""The default loop stops its walk of the prompts once the step's chunk budget is spent (switch
``default.STOP_WHEN_SPENT``): with it on, every table, summary and retraction (victim, reason, count) is as with
each request left in the walk asked for a chunk under no budget (off), in the fast loop and step by step.
Generated ``no-cache`` and ``radix`` bursts with small chunk budgets (a step's decodes and first chunks spend it
before the walk ends) on pools from tight to roomy, so the cap closes and reopens; bounds on and off. Each
switch-off run counts the walk's requests asked under a spent budget and the switch-on run must ask none, so the
property is not met by a walk that never stops."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings

from sim.run.simulate import SimConfig
from sim.sched import default
from sim.sched.default import DefaultScheduler
from tests.default_loop_switches import burst_config, policy_bursts, switched_both_ways
from tests.test_capped_stalls import _burst

_ADD_PREFILL = DefaultScheduler._add_prefill

# the runs count through patches of DefaultScheduler._add_prefill and _retract, which the compiled core binds
pytestmark = pytest.mark.interpreted


def stopped_both_ways(trace, config: SimConfig, fast_path: bool) -> int:
    """The run with the switch on and off held the same (retractions as the log); how many chunks the switch-off
    run asked for under a spent budget (the switch-on run asks for none)."""

    def counting(spent: list[int]):
        def add_prefill(scheduler: DefaultScheduler, batch, run_state, budget: int) -> int:
            spent[0] += budget <= 0
            return _ADD_PREFILL(scheduler, batch, run_state, budget)

        return mock.patch.object(DefaultScheduler, "_add_prefill", autospec=True, side_effect=add_prefill)

    on, off = switched_both_ways((default, "STOP_WHEN_SPENT"), trace, config, fast_path, counting)
    assert on[2] == 0
    return off[2]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(policy_bursts())
def test_a_spent_budget_stops_the_walk_and_changes_nothing(run):
    stopped_both_ways(*run)


@pytest.mark.parametrize(("page", "chunk_tokens"), [(2, 32), (16, 16), (64, 64)])
@pytest.mark.parametrize("fast_path", [True, False])
def test_a_spent_budget_stops_the_walk_at_each_page(page: int, chunk_tokens: int, fast_path: bool):
    """A burst whose prompts outlast a chunk budget of a page or two: walks stop (130-770 chunks asked for under a
    spent budget with the switch off), and the runs agree, in the fast loop and step by step."""
    knobs = dict(
        page_size=page, track_interval=128, chunked_prefill_size=chunk_tokens, max_running_requests=12
    )
    config = burst_config(knobs, 40000, False)
    assert stopped_both_ways(_burst(), config, fast_path) > 0
