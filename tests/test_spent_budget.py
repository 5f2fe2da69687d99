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
from sim.trace import Request, Segment, Trace
from tests.default_loop_switches import burst_config, policy_bursts, switched_both_ways
from tests.test_capped_stalls import _burst

_ADD_PREFILL = DefaultScheduler._add_prefill

# the runs count through patches of DefaultScheduler._add_prefill and _retract, which the compiled core binds
pytestmark = [pytest.mark.interpreted, pytest.mark.usefixtures("default_loop_no_cache")]  # no-cache on the default loop, as these were written (tests/default_loop_no_cache.py)


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


def _one_token_burst() -> Trace:
    """Ten prompts of 1,351-3,893 tokens arriving within 180 ms (a generated burst that reaches the case)."""
    rows = [(1614, 194, 107), (2265, 93, 112), (2556, 217, 144), (3469, 200, 151), (2275, 202, 165),
            (3893, 88, 228), (1351, 168, 240), (3106, 61, 268), (2468, 83, 270), (3776, 65, 283)]  # fmt: skip
    return Trace([
        Request(id=f"r{index}", arrival=arrival_ms / 1000, output_len=output_len,
                prompt=[Segment(ref=f"r{index}", len=prompt_len)])
        for index, (prompt_len, output_len, arrival_ms) in enumerate(rows)
    ])  # fmt: skip


@pytest.mark.parametrize("fast_path", [True, False])
def test_one_token_left_still_sizes_a_chunk(fast_path: bool):
    """A walk that reaches a running continuation with one token of the budget left (``r7`` at position 2, page 2,
    a budget of 32): SGLang cuts a continuation anywhere, so it gets a one-token chunk, and a walk that stopped with
    a token left would change the run (none of the runs above sizes a one-token chunk in the walk)."""
    knobs = dict(page_size=2, track_interval=64, chunked_prefill_size=32, max_running_requests=12)
    config = burst_config(knobs, 40000, False)
    assert stopped_both_ways(_one_token_burst(), config, fast_path) > 0
