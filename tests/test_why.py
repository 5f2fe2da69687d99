"""The per-request ``why`` column: each recomputed range's reason, exact on scenarios built to cause it."""
from __future__ import annotations

import pytest

from sim.cache.reasons import (
    FULL_EVICTED,
    MAMBA_EVICTED,
    MAMBA_STATE,
    NEVER_KEPT,
    NEW,
    PAGE_ROUNDING,
    SWA_EVICTION,
    SWA_FINISH_TRIM,
    SWA_TRIGGER,
)
from sim.run.simulate import SimConfig, simulate
from sim.run.why import format_ranges, parse_ranges, why_tokens
from sim.trace import load_trace
from sim.trace.generate import s1, s3

S1_POOLS = {"pool_tokens": 4_000_000, "mamba_states": 4096}


def two_turns(write_lines, num: int = 20, prompt_len: int = 2000, output_len: int = 300):
    """All first turns, then every second turn (prompt + the first's output + 50 tokens), open loop: in
    replay mode each second turn comes after every first turn, so small pools evict what it needs."""
    lines = [{"id": f"a{i}", "arrival": float(i), "prompt": [{"ref": f"p{i}", "len": prompt_len}],
              "output_len": output_len} for i in range(num)]
    lines += [{"id": f"b{i}", "arrival": 100.0 + i, "prompt": [{"ref": f"p{i}", "len": prompt_len},
                                                                {"output_of": f"a{i}"}, {"ref": f"q{i}", "len": 50}],
               "output_len": 4} for i in range(num)]
    return load_trace(write_lines(lines))


def why_of(result, request_id: str) -> str:
    return result.requests.set_index("id").loc[request_id, "why"]


def second_turn_reasons(result) -> set[str]:
    rows = result.requests[result.requests["id"].str.startswith("b")]
    return {reason for text in rows["why"] for _, _, reason in parse_ranges(text)}


def assert_ranges_cover_every_recomputed_token(result) -> None:
    for row in result.requests[result.requests["rejected"] == ""].itertuples():
        ranges = parse_ranges(row.why)
        assert sum(end - start for start, end, _ in ranges) == row.recomputed_tokens, row.id
        assert [start for start, _, _ in ranges][:1] == ([row.cached_tokens] if ranges else [])
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False)), row.why  # contiguous
    totals = why_tokens(result.requests)
    assert sum(totals.values()) == result.summary["recomputed_tokens"]
    assert all(result.summary[f"why_{reason}_tokens"] == count for reason, count in totals.items())


def test_s1_second_turns_lose_their_window_to_the_trigger_and_the_floor_keeps_it():
    trace = s1(num_prompts=4)
    config = dict(knobs={"page_size": 128, "track_interval": 256, "chunked_prefill_size": 16384}, **S1_POOLS)
    before = simulate(trace, SimConfig(policy="sglang", **config))
    after = simulate(trace, SimConfig(policy="sglang-retain", **config))
    # SPEC S1's worked example: the match lands at 2944, the 3840 checkpoint's window was freed; the tree kept
    # the first turn up to 3840; a page-128 match cannot reach past 3968; 4024 is the last shared token
    assert why_of(before, "p0-t2") == (f"{SWA_TRIGGER} [2944,3840); {NEVER_KEPT} [3840,3968); "
                                       f"{PAGE_ROUNDING} [3968,4024); {NEW} [4024,4025)")
    assert why_of(after, "p0-t2") == f"{NEVER_KEPT} [3840,3968); {PAGE_ROUNDING} [3968,4024); {NEW} [4024,4025)"
    for result in (before, after):
        assert_ranges_cover_every_recomputed_token(result)


def test_freetoken_fanout_loses_the_shared_prefix_to_the_finish_trim():
    trace = s3()
    trimmed = simulate(trace, SimConfig(policy="freetoken", model="gemma-4-26b-a4b"))
    lazy = simulate(trace, SimConfig(policy="freetoken-lazy", model="gemma-4-26b-a4b"))
    assert why_of(trimmed, "r2") == f"{SWA_FINISH_TRIM} [0,7700); {NEW} [7700,7780)"
    assert why_of(lazy, "r2") == f"{NEW} [7700,7780)"


@pytest.mark.parametrize("pools, reason", [
    ({"pool_tokens": 12_000, "mamba_states": 4096}, FULL_EVICTED),
    ({"pool_tokens": 4_000_000, "swa_pool_tokens": 1, "mamba_states": 4096, "knobs": {"max_running_requests": 1}},
     SWA_EVICTION),
    ({"pool_tokens": 4_000_000, "mamba_states": 12, "knobs": {"max_running_requests": 1}}, MAMBA_EVICTED),
])
def test_each_pool_that_evicts_is_named(write_lines, pools, reason):
    trace = two_turns(write_lines)
    large = simulate(trace, SimConfig(policy="sglang-retain", mode="replay", pool_tokens=4_000_000,
                                      mamba_states=4096))
    small = simulate(trace, SimConfig(policy="sglang-retain", mode="replay", **pools))
    assert second_turn_reasons(large) == {NEVER_KEPT, PAGE_ROUNDING, NEW}  # nothing evicted, nothing blocked
    assert reason in second_turn_reasons(small)
    assert small.summary[f"why_{reason}_tokens"] > 10_000
    assert_ranges_cover_every_recomputed_token(small)


def test_a_fanout_without_a_checkpoint_at_the_branch_is_blocked_by_the_missing_state():
    result = simulate(load_trace("traces/fanout.jsonl"), SimConfig(policy="sglang-retain"))
    assert result.summary[f"why_{MAMBA_STATE}_tokens"] == result.summary["blocked_tokens"] > 0
    assert_ranges_cover_every_recomputed_token(result)


@pytest.mark.parametrize("policy, model", [("sglang", "inkling"), ("freetoken", "gemma-4-26b-a4b"),
                                           ("radix", "inkling")])
def test_ranges_add_up_on_a_real_trace_under_pressure(policy, model):
    trace = load_trace("traces/mooncake_conversation_500.jsonl")
    result = simulate(trace, SimConfig(policy=policy, model=model, kv_memory_gb=2.0, mode="replay"))
    assert result.summary["evictions_full"] > 0
    assert_ranges_cover_every_recomputed_token(result)
    assert result.summary[f"why_{FULL_EVICTED}_tokens"] > 0


def test_rejected_requests_have_no_ranges_and_the_text_round_trips():
    ranges = [(0, 512, SWA_TRIGGER), (512, 600, NEW)]
    assert parse_ranges(format_ranges(ranges)) == ranges
    assert parse_ranges("") == []
    result = simulate(load_trace("traces/mooncake_conversation_500.jsonl"),
                      SimConfig(policy="sglang-retain", pool_tokens=100_000, mode="replay"))
    rejected = result.requests[result.requests["rejected"] != ""]
    assert len(rejected) == 5 and (rejected["why"] == "").all()
