"""The timed mode's fast path (runs of plain decode steps) changes no table: fast and step-by-step
runs of the same trace give identical per-request and per-step tables."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.event_delays import delay_landing_on as _delay_landing_on
from sim.run.event_delays import event_delays as _event_delays
from sim.run.simulate import SimConfig, simulate
from sim.trace import load_trace
from sim.trace.generate import fanout, multiturn, s1

TRACES = {
    "fanout": lambda: fanout(num_groups=3, prompts_per_group=5, system_len=300, question_len=40, output_len=90,
                             request_rate=2.0, seed=2),
    "multiturn": lambda: multiturn(num_sessions=4, num_turns=3, system_len=200, user_len=30, output_len=150,
                                   think_time=0.3, request_rate=3.0, seed=5),
    "s1": lambda: s1(num_prompts=4, prompt_len=700, output_len=300),
    "mooncake": lambda: load_trace("traces/mooncake_conversation_500.jsonl"),
}
CASES = [
    ("fanout", "sglang", dict(page_size=16, track_interval=64)),
    ("fanout", "freetoken", dict(page_size=1, track_interval=64)),
    ("multiturn", "sglang-retain", dict(page_size=32, track_interval=64, swa_free_trigger="iterations")),
    ("multiturn", "freetoken-lazy", dict(page_size=8, track_interval=64, max_running_requests=3)),
    ("s1", "sglang", dict(page_size=64, track_interval=128, swa_free_trigger="iterations", iteration_phase=5)),
    ("s1", "sglang-retain-tree", dict(page_size=64, track_interval=128)),
    ("mooncake", "sglang-retain", dict(page_size=64)),
]


@pytest.mark.parametrize("trace_name, policy, knobs", CASES)
def test_fast_path_changes_nothing(trace_name, policy, knobs):
    trace = TRACES[trace_name]()
    config = SimConfig(policy=policy, model="inkling" if "free" not in policy else "gemma-4-26b-a4b", knobs=knobs,
                       pool_tokens=60_000 if trace_name != "mooncake" else 400_000, mamba_states=64)
    if trace_name == "mooncake":
        trace = type(trace)(list(trace)[:120])
    fast = simulate(trace, config, fast_path=True)
    slow = simulate(trace, config, fast_path=False)
    assert fast.requests.equals(slow.requests)
    assert fast.steps.equals(slow.steps)
    assert fast.summary == slow.summary


@settings(max_examples=3000, deadline=None)
@given(st.floats(0, 1e7, allow_nan=False), st.lists(st.floats(1e-9, 10.0, allow_nan=False), min_size=1, max_size=50))
def test_the_events_end_where_the_steps_would(now, durations):
    """The fast path's timeouts end exactly where step after step would have (now + d1 + d2 ...)."""
    end = now
    for duration in durations:
        end = end + duration
    delays = _event_delays(now, durations)
    clock = now
    for delay in delays:
        clock = clock + delay
    assert clock == end
    assert len(delays) <= len(durations)


def test_an_end_that_rounding_skips_takes_the_last_step_alone():
    # from 1.00001, no single delay lands on 1.00001 + 0.6 + 4.0 (ties round to even, skipping it)
    assert _delay_landing_on(1.00001, (1.00001 + 0.6) + 4.0) is None
    delays = _event_delays(1.00001, [0.6, 4.0])
    assert delays[-1] == 4.0 and len(delays) == 2
    assert _event_delays(1.0, [0.5, 0.25, 0.125]) == [0.875]
