"""The SWA free trigger and its closed form (the fast path's count of silent decode steps) agree, over
windows, pages, intervals and triggers that are not multiples of each other; and the whole timed engine
gives the same tables with and without the fast path on such configurations (the cache alone, over many more
configurations: test_decode_fast_path_property.py)."""
from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.engines.swa_trigger import SwaTrigger
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import multiturn


@settings(max_examples=2000, deadline=None, derandomize=True)
@given(st.sampled_from(["tokens", "iterations"]), st.integers(1, 300), st.integers(0, 700),
       st.integers(0, 5000), st.integers(0, 3000), st.integers(0, 3), st.integers(0, 1000))
def test_no_step_the_closed_form_calls_silent_fires(mode, interval, window, kv_len, frontier, decode_steps,
                                                   iteration):
    trigger = SwaTrigger(mode, interval, window)
    req = SimpleNamespace(kv_len=kv_len, swa_frontier=frontier, decode_steps=decode_steps)
    silent = trigger.silent_steps(req, iteration)
    for step in range(min(silent, 2000)):
        moved = SimpleNamespace(kv_len=kv_len + step, swa_frontier=frontier, decode_steps=decode_steps + step)
        assert not trigger.fires(moved, iteration + step), (step, silent)
    if mode == "tokens" and silent < 2000:  # exact: the step after the silent ones fires
        moved = SimpleNamespace(kv_len=kv_len + silent, swa_frontier=frontier, decode_steps=decode_steps + silent)
        assert trigger.fires(moved, iteration + silent)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.sampled_from(["sglang", "sglang-retain", "freetoken", "freetoken-lazy"]), st.sampled_from([1, 4, 16, 32]),
       st.integers(33, 300), st.sampled_from([3, 5, 7]), st.integers(7, 200),
       st.sampled_from(["tokens", "iterations"]), st.integers(0, 127))
def test_fast_path_equals_step_by_step(policy, page, window, interval_pages, eviction_interval, trigger, phase):
    trace = multiturn(num_sessions=3, num_turns=2, system_len=150, user_len=37, output_len=230, think_time=0.2,
                      request_rate=5.0, seed=7)
    knobs = dict(page_size=page, window=window, track_interval=page * interval_pages,
                 swa_eviction_interval=eviction_interval, swa_free_trigger=trigger, iteration_phase=phase,
                 chunked_prefill_size=page * 8, mamba_chunk=page if page >= 16 else 16)
    model = "gemma-4-26b-a4b" if policy.startswith("freetoken") else "inkling"
    config = SimConfig(policy=policy, model=model, knobs=knobs, pool_tokens=40_000, mamba_states=48)
    fast = simulate(trace, config, fast_path=True)
    slow = simulate(trace, config, fast_path=False)
    assert fast.requests.equals(slow.requests)
    assert fast.steps.equals(slow.steps)
