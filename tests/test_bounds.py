"""The bounds: Belady equals an exhaustive search on tiny cases, the state bound's solver never undercuts the
best choice of options, and no sound policy's reuse exceeds ``bound_tokens`` in either mode."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.bounds.belady import belady_hits
from sim.bounds.events import Lookup, Produce, replay_events
from sim.bounds.page_paths import PagePaths
from sim.bounds.state_bound import state_bound, state_options
from sim.engines.registry import PRESETS
from sim.run.replay import replay_order
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace, load_trace
from tests.bounds_helpers import brute_force_full, brute_force_options, small_traces

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))
SOUND = [name for name in PRESETS if not name.startswith("broken-")]


def _events(trace: Trace, page: int) -> list:
    order = replay_order(trace)
    return replay_events(trace, order, set(order), set(order), page)


def _trace(*prompts: list[tuple[str, int]], output_len: int = 1) -> Trace:
    return Trace([Request(id=f"r{i}", arrival=float(i), prompt=[Segment(ref=r, len=n) for r, n in prompt],
                          output_len=output_len) for i, prompt in enumerate(prompts)])


def test_belady_keeps_the_page_needed_soonest():
    # a, b, a, b with room for one 4-page prompt: LRU would hit nothing; Belady keeps a for the third request
    trace = _trace([("a", 5)], [("b", 5)], [("a", 5)], [("b", 5)])
    events = _events(trace, 1)
    hits = belady_hits(events, PagePaths(trace, 1), capacity_pages=4)
    assert hits == {"r0": 0, "r1": 0, "r2": 4, "r3": 0}
    assert sum(belady_hits(events, PagePaths(trace, 1), capacity_pages=8).values()) == 8


def test_belady_counts_only_pages_below_the_key():
    trace = _trace([("a", 8)], [("a", 8)])  # the second prompt's last token is recomputed: 7 of 8 at page 1
    assert belady_hits(_events(trace, 1), PagePaths(trace, 1), 100)["r1"] == 7
    assert belady_hits(_events(trace, 4), PagePaths(trace, 4), 100)["r1"] == 4


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(max_requests=4), capacity=st.integers(0, 3))
def test_belady_equals_exhaustive_search(trace, capacity):
    events, paths = _events(trace, 8), PagePaths(trace, 8)
    assert sum(belady_hits(events, paths, capacity).values()) == brute_force_full(events, paths, capacity)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(max_requests=6), capacity=st.integers(0, 3))
def test_state_bound_is_never_below_the_best_choice(trace, capacity):
    options = state_options(_events(trace, 4), PagePaths(trace, 4))
    best = brute_force_options(options, capacity)
    bound = state_bound(options, capacity)
    assert best <= bound <= options.ideal
    if capacity == 0:
        assert bound == 0


def test_a_shared_state_is_one_state_for_its_users():
    # r1 and r2 both resume from r0's prefix: with one state both hits fit (the second starts where the first
    # used it); r3 needs another prefix at the same time as r1/r2 would need theirs
    trace = _trace([("a", 9)], [("a", 8), ("x", 2)], [("a", 8), ("y", 2)])
    options = state_options(_events(trace, 4), PagePaths(trace, 4))
    assert state_bound(options, 1) == 16 and brute_force_options(options, 1) == 16


def test_events_of_a_timed_run_mark_each_served_request_once(tmp_path):
    trace = _trace([("a", 40)], [("a", 40), ("b", 8)], output_len=4)
    result = simulate(trace, SimConfig(policy="radix", model="tiny", mode="timed",
                                       knobs={"page_size": 4, "track_interval": 4}, pool_tokens=4000))
    assert result.summary["bound_belady_tokens"] >= result.summary["cached_tokens"] > 0


@pytest.mark.parametrize("mode", ["replay", "timed"])
@settings(max_examples=max(EXAMPLES // 6, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), preset=st.sampled_from(SOUND), model=st.sampled_from(["tiny", "qwen3-next", "tiny-swa"]),
       pools=st.sampled_from([(64, 8), (96, 3), (4000, 64)]), page=st.sampled_from([1, 4]),
       budget=st.sampled_from([None, 2.0e5, 6.0e5]))
def test_no_policy_exceeds_the_bound(mode, trace, preset, model, pools, page, budget):
    knobs = {"page_size": page, "track_interval": 8, "chunked_prefill_size": 16}
    if budget is not None and not PRESETS[preset].engine == "marconi":
        budget = None
    if PRESETS[preset].engine == "freetoken" or budget is not None:
        knobs.pop("page_size")  # FreeToken's page 1; with one byte budget the preset's page
    config = SimConfig(policy=preset, model=model, mode=mode, knobs=knobs, pool_tokens=pools[0],
                       mamba_states=pools[1], cache_bytes=budget)
    try:
        result = simulate(trace, config)
    except ValueError as refused:  # an engine refusing this combination says so; nothing to compare
        assert "must" in str(refused) or "refuse" in str(refused) or "holds less" in str(refused)
        return
    summary = result.summary
    assert summary["cached_tokens"] <= summary["bound_tokens"] <= summary["bound_belady_tokens"]


def test_produce_events_of_replay_cover_what_each_request_computes():
    trace = _trace([("a", 9)], output_len=5)
    assert _events(trace, 4) == [Lookup("r0", 2, True), Produce("r0", 0, 3)]


SAMPLES = Path(__file__).resolve().parents[1] / "traces"


def _sample_run(name: str, preset: str, model: str):
    trace = load_trace(str(SAMPLES / name))
    try:
        return simulate(trace, SimConfig(policy=preset, model=model, mode="replay"))
    except ValueError as refused:  # a preset that cannot serve this model says so
        pytest.skip(str(refused))


@pytest.mark.parametrize("preset", SOUND)
@pytest.mark.parametrize("name", ["multiturn.jsonl", "fanout.jsonl"])
def test_no_preset_exceeds_the_bound_on_the_sample_traces(name, preset):
    model = "gemma-4-26b-a4b" if PRESETS[preset].engine == "freetoken" else "qwen3-next"
    summary = _sample_run(name, preset, model).summary
    assert summary["cached_tokens"] <= summary["bound_tokens"] <= summary["bound_belady_tokens"]
    assert summary["bound_belady_tokens"] <= summary["ideal_cached_tokens"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["radix", "sglang-retain", "marconi", "marconi-vllm"])
def test_no_preset_exceeds_the_bound_on_the_mooncake_sample(preset):
    summary = _sample_run("mooncake_conversation_500.jsonl", preset, "qwen3-next").summary
    assert summary["cached_tokens"] <= summary["bound_tokens"] <= summary["bound_belady_tokens"]


def test_a_run_too_large_for_the_bounds_says_so(monkeypatch):
    import sim.bounds.summary as summary_module

    monkeypatch.setattr(summary_module, "MAX_BOUND_PAGES", 10)
    summary = simulate(_trace([("a", 40)], [("a", 40)]), SimConfig(policy="radix", model="tiny", mode="replay",
                                                                    knobs={"page_size": 1})).summary
    assert "bound_tokens" not in summary and summary["bound_skipped"].startswith("80 computed pages at page 1")
