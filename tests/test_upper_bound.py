"""The upper bound beside a result, and the real-multiturn experiment built on it."""
from __future__ import annotations

import pytest

from reports.simulate_header import Run
from reports.simulate_view import rows
from sim.experiments.real_multiturn import PAIRS, changed_requests, misses, real_multiturn
from sim.run.resolved import resolved_config
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace, load_trace


def _chat() -> Trace:
    return Trace([
        Request(id="a1", arrival=0.0, prompt=[Segment(ref="sys", len=300), Segment(ref="q1", len=40)], output_len=200),
        Request(id="a2", after="a1", prompt=[Segment(ref="sys", len=300), Segment(ref="q1", len=40),
                                             Segment(output_of="a1"), Segment(ref="q2", len=30)], output_len=20),
        Request(id="b1", arrival=0.5, prompt=[Segment(ref="sys", len=300), Segment(ref="q3", len=10)], output_len=5),
    ])


@pytest.fixture(scope="module")
def slice_250() -> Trace:
    return Trace(load_trace("traces/mooncake_conversation_500.jsonl").requests[:250])


def test_ideal_is_reached_by_the_ideal_cache():
    result = simulate(_chat(), SimConfig(policy="radix", mode="replay", knobs={"page_size": 1}))
    requests = result.requests.set_index("id")
    assert list(requests["ideal_cached_tokens"]) == [0, 540, 300]  # a2: 340 + 200 of a1's output; b1: sys
    # the last output token is never fed back, so no cache holds its KV: the bound is one token above
    assert result.summary["ideal_cached_tokens"] == result.summary["cached_tokens"] + 1 == 840
    assert result.summary["ideal_decode_region_hits"] == result.summary["decode_region_hits"] == 1
    gaps = ("gap_evicted_tokens", "gap_never_kept_tokens", "gap_blocked_tokens")
    assert tuple(result.summary[k] for k in gaps) == (0, 1, 0)  # a1 kept 539 of its 540 tokens


@pytest.mark.parametrize("policy, pool_tokens", [("sglang", 4_000_000), ("sglang-retain", 4_000_000),
                                                 ("sglang-retain", 200_000)])
def test_the_gap_splits_exactly_in_three(slice_250, policy, pool_tokens):
    summary = simulate(slice_250, SimConfig(policy=policy, mode="replay", pool_tokens=pool_tokens,
                                            mamba_states=20_000)).summary
    gap = summary["ideal_cached_tokens"] - summary["cached_tokens"]
    assert gap == summary["gap_evicted_tokens"] + summary["gap_never_kept_tokens"] + summary["gap_blocked_tokens"]
    assert summary["gap_never_kept_tokens"] > 0  # inkling's finish keeps a request up to its last checkpoint
    assert summary["decode_region_hits"] <= summary["ideal_decode_region_hits"] <= summary["followup_requests"]


def test_small_pools_lose_to_eviction_not_to_blocking(slice_250):
    large = simulate(slice_250, SimConfig(policy="sglang-retain", mode="replay", pool_tokens=4_000_000,
                                          mamba_states=20_000)).summary
    small = simulate(slice_250, SimConfig(policy="sglang-retain", mode="replay", pool_tokens=200_000,
                                          mamba_states=20_000)).summary
    assert small["gap_evicted_tokens"] > 10 * max(large["gap_evicted_tokens"], 1)
    assert small["evictions_full"] > large["evictions_full"]


def test_tables_name_the_upper_bound(slice_250):
    config = SimConfig(policy="sglang", mode="replay", pool_tokens=4_000_000, mamba_states=20_000)
    base = simulate(slice_250, config)
    other = simulate(slice_250, SimConfig(**{**config.__dict__, "policy": "sglang-retain"}))
    runs = [Run("sglang", base.summary, resolved_config(base.setup)),
            Run("sglang-retain", other.summary, resolved_config(other.setup))]
    table = {row[0].strip(): row[1:] for row in rows(runs, timed=False)}
    s = base.summary
    assert table["decode-region hits (follow-ups)"][0] == (f"{s['decode_region_hits']:,} / {s['followup_requests']:,} "
                                                           f"(ideal {s['ideal_decode_region_hits']:,})")
    assert table["upper bound: ideal reused tokens"][0].startswith(f"{s['ideal_cached_tokens']:,} (")
    blocked = sum(s[f"why_{r}_tokens"] for r in ("mamba_state", "mamba_evicted", "swa_trigger", "swa_finish_trim",
                                                 "swa_eviction", "blocked_other"))
    assert blocked == s["gap_blocked_tokens"]  # the why split refines the upper bound's blocked count


def test_real_multiturn_tables_agree_with_the_runs(slice_250):
    pools = {"large": 3000.0, "default": 40.0}
    result = real_multiturn(slice_250, pools, PAIRS[:1], mode="replay")
    assert list(result.pairs["pools"]) == ["large (3000 GB)", "default (40 GB)"]
    assert list(result.misses["policy"]) == ["sglang", "sglang-retain"] * 2
    parts = ["hits", "miss: trace allows none", "miss: previous answer never cached", "miss: evicted or unfinished",
             "miss: blocked by SWA/MAMBA"]
    assert (result.misses[parts].sum(axis=1) == result.misses["follow-ups"]).all()
    large = result.pairs.iloc[0]
    base = simulate(slice_250, SimConfig(policy="sglang", kv_memory_gb=3000.0, mode="replay"))
    other = simulate(slice_250, SimConfig(policy="sglang-retain", kv_memory_gb=3000.0, mode="replay"))
    before, after = misses(base)["hits"], misses(other)["hits"]
    assert large["decode-region hits"].startswith(f"{before}/") and f"-> {after}/" in large["decode-region hits"]
    assert after > before  # the retain floor's second turns, on real conversations
    changed = changed_requests(base, other, limit=100)
    assert len(changed) == after - before and set(changed["id"]) <= set(result.changed["id"]) | set(changed["id"])


def test_experiment_real_multiturn_from_the_cli(tmp_path, slice_250):
    from click.testing import CliRunner

    from cli import cli
    from sim.trace import write_trace

    path = tmp_path / "slice.jsonl"
    write_trace(slice_250, path)
    result = CliRunner().invoke(cli, ["experiment", "real-multiturn", "--trace", str(path), "--pairs", "sglang",
                                      "--mode", "replay", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "| large (3000 GB) | sglang -> sglang-retain | inkling |" in result.stdout
    assert "Why follow-ups miss the decode region" in result.stdout


@pytest.mark.parametrize("args, phrase", [
    (["--pairs", "vllm"], "unknown pair 'vllm'"),
    (["--trace", "traces/fanout.jsonl"], "no follow-up requests"),
])
def test_experiment_real_multiturn_bad_input(args, phrase):
    from click.testing import CliRunner

    from cli import cli

    result = CliRunner().invoke(cli, ["experiment", "real-multiturn", "--mode", "replay", *args])
    assert result.exit_code == 2 and phrase in result.stderr
