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
from hypothesis import strategies as st

from sim.run.simulate import SimConfig, simulate
from sim.sched import default
from sim.sched.default import DefaultScheduler
from tests.same_runs import same_both_ways
from tests.test_capped_stalls import _burst, bursts

_ADD_PREFILL = DefaultScheduler._add_prefill
_RETRACT = DefaultScheduler._retract

# the runs count through patches of DefaultScheduler._add_prefill and _retract, which the compiled core binds
pytestmark = pytest.mark.interpreted


def stopped_both_ways(trace, config: SimConfig, fast_path: bool) -> int:
    """The run with the switch on and off held the same (retractions as the log); how many chunks the switch-off
    run asked for under a spent budget (the switch-on run asks for none)."""

    def run(on: bool) -> tuple:
        retracted: list[tuple[str, str, int]] = []
        spent = [0]

        def retract(scheduler: DefaultScheduler, victim, why: str) -> None:
            retracted.append((victim.request_id, why, victim.num_retractions))
            _RETRACT(scheduler, victim, why)

        def add_prefill(scheduler: DefaultScheduler, batch, run_state, budget: int) -> int:
            spent[0] += budget <= 0
            return _ADD_PREFILL(scheduler, batch, run_state, budget)

        with (
            mock.patch.object(default, "STOP_WHEN_SPENT", on),
            mock.patch.object(DefaultScheduler, "_retract", autospec=True, side_effect=retract),
            mock.patch.object(DefaultScheduler, "_add_prefill", autospec=True, side_effect=add_prefill),
        ):
            return retracted, simulate(trace, config, fast_path=fast_path), spent[0]

    on, off = same_both_ways(run)
    assert on[2] == 0
    return off[2]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(bursts(), st.sampled_from(["no-cache", "radix"]), st.booleans())
def test_a_spent_budget_stops_the_walk_and_changes_nothing(burst, policy: str, fast_path: bool):
    trace, knobs, pool_tokens, bounds = burst
    config = SimConfig(
        policy=policy, model="inkling", knobs=knobs, pool_tokens=pool_tokens, mamba_states=48, bounds=bounds
    )
    stopped_both_ways(trace, config, fast_path)


@pytest.mark.parametrize(("page", "chunk_tokens"), [(2, 32), (16, 16), (64, 64)])
@pytest.mark.parametrize("fast_path", [True, False])
def test_a_spent_budget_stops_the_walk_at_each_page(page: int, chunk_tokens: int, fast_path: bool):
    """A burst whose prompts outlast a chunk budget of a page or two: walks stop (130-770 chunks asked for under a
    spent budget with the switch off), and the runs agree, in the fast loop and step by step."""
    knobs = dict(
        page_size=page, track_interval=128, chunked_prefill_size=chunk_tokens, max_running_requests=12
    )
    config = SimConfig(
        policy="no-cache", model="inkling", knobs=knobs, pool_tokens=40000, mamba_states=48, bounds=False
    )
    assert stopped_both_ways(_burst(), config, fast_path) > 0
