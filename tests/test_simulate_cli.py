"""cli.py simulate and experiment: embedded defaults, JSON keys, CSV outputs, bad input, seed shapes."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from cli import cli
from sim.experiments import seeds as experiments
from sim.trace import write_trace
from sim.trace.generate import s1

JSON_KEYS = {"requests", "prompt_tokens", "cached_tokens", "recomputed_tokens", "mean_reuse_fraction",
             "decode_region_hits", "followup_requests", "peak_swa_slots", "peak_mamba_states", "makespan_s"}


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_simulate_defaults_on_the_sample_fanout():
    result = invoke("simulate", "--trace", "traces/fanout.jsonl")
    assert result.exit_code == 0, result.output
    assert "reused (cached) tokens" in result.output


def test_simulate_json_and_compare(tmp_path):
    result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "freetoken", "--model",
                    "gemma-4-26b-a4b", "--compare", "freetoken-lazy", "--format", "json", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert {"trace", "policy", "config", "resolved", "pools", "summary", "compare"} <= set(payload)
    assert JSON_KEYS <= set(payload["summary"]) and JSON_KEYS <= set(payload["compare"]["summary"])
    assert payload["config"]["policy"] == "freetoken" and payload["compare"]["config"]["policy"] == "freetoken-lazy"
    assert payload["resolved"]["knobs"]["page_size"] == 1 and payload["resolved"]["knobs"]["window"] == 1024
    assert payload["pools"]["full_slots"] == payload["summary"]["capacity_full_slots"] > 0
    assert payload["compare"]["summary"]["cached_tokens"] >= payload["summary"]["cached_tokens"]
    assert payload["compare"]["regressed_requests"] == 0
    # with --compare, each run's files carry its policy: no unnamed requests.csv beside a named one
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {f"{t}.{p}.{e}" for t, e in (("requests", "csv"), ("steps", "csv"), ("summary", "json"))
                     for p in ("freetoken", "freetoken-lazy")}
    requests = pd.read_csv(tmp_path / "requests.freetoken.csv")
    assert {"id", "prompt_tokens", "cached_tokens", "full_depth", "blocked", "decode_region_hit", "why"} <= set(requests)
    assert requests["cached_tokens"].sum() == payload["summary"]["cached_tokens"]


def test_simulate_text_header_pools_peaks_and_percentiles():
    result = invoke("simulate", "--trace", "traces/fanout.jsonl", "--page-size", "128")
    assert result.exit_code == 0, result.output
    text = result.output
    payload = json.loads(invoke("simulate", "--trace", "traces/fanout.jsonl", "--page-size", "128", "--format",
                                "json").output)
    summary, pools = payload["summary"], payload["pools"]
    for phrase in ("page_size 128", "track_interval 256", "window 512", "retain_floor request",
                   f"FULL {pools['full_slots']:,} tokens", f"MAMBA {pools['mamba_states']:,} states"):
        assert phrase in text, phrase
    peak = next(line for line in text.splitlines() if line.strip().startswith("peak FULL held"))
    assert f"{summary['peak_full_slots']:,} / {pools['full_slots']:,} (" in peak
    latencies = next(line for line in text.splitlines() if line.strip().startswith("TTFT p50 / p90 / p99 (ms)"))
    p50, p90, p99 = (float(v) for v in latencies.split()[-5::2])
    assert p50 == pytest.approx(1000 * summary["ttft_p50_s"], rel=0.01) and p50 <= p90 <= p99
    assert f"{summary['prompt_tokens']:,}" in text  # thousands separators


def test_simulate_markdown_is_one_table_with_the_change_column():
    result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "sglang", "--compare",
                    "sglang-retain", "--mode", "replay", "--format", "md")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("**sglang vs sglang-retain on multiturn.jsonl")  # no local folders in a PR
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == "| figure | `sglang` | `sglang-retain` | change |" and table[1] == "|:---|---:|---:|---:|"
    assert all(line.count("|") == 5 for line in table)
    assert any(line.startswith("| makespan (s) | none (replay) |") for line in table)


def test_simulate_parquet_tables_equal_the_csv_ones(tmp_path):
    pytest.importorskip("pyarrow")
    for fmt in ("csv", "parquet"):
        result = invoke("simulate", "--trace", "traces/fanout.jsonl", "--mode", "replay", "--out",
                        str(tmp_path / fmt), "--table-format", fmt)
        assert result.exit_code == 0, result.output
    parquet = pd.read_parquet(tmp_path / "parquet" / "requests.parquet")
    csv = pd.read_csv(tmp_path / "csv" / "requests.csv", keep_default_na=False)
    assert list(parquet.columns) == list(csv.columns) and len(parquet) == len(csv) == 128
    assert parquet["cached_tokens"].tolist() == csv["cached_tokens"].tolist()
    assert parquet["why"].tolist() == csv["why"].tolist()
    assert (tmp_path / "parquet" / "steps.parquet").is_file()


def test_simulate_refuses_to_compare_a_policy_with_itself():
    result = CliRunner().invoke(cli, ["simulate", "--trace", "traces/fanout.jsonl", "--compare", "sglang-retain"])
    assert result.exit_code == 2 and "--compare sglang-retain is the policy already simulated" in result.output


def test_simulate_is_byte_identical_across_runs(tmp_path):
    outputs = [invoke("simulate", "--trace", "traces/fanout.jsonl", "--format", "json", "--page-size", "128").output
               for _ in range(2)]
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("args, message", [
    (["--policy", "nope"], "nope"),
    (["--page-size", "0"], "page-size"),
    (["--page-size", "64", "--track-interval", "100"], "--track-interval 100 must be a multiple of --page-size 64"),
    (["--pool-tokens", "10", "--page-size", "64"], "less than one"),
])
def test_simulate_rejects_bad_input(args, message):
    result = CliRunner().invoke(cli, ["simulate", "--trace", "traces/fanout.jsonl", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_simulate_rejects_a_malformed_trace(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "arrival": 0, "prompt": [{"ref": "x", "len": -3}], "output_len": 4}\n')
    result = CliRunner().invoke(cli, ["simulate", "--trace", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output


def test_s1_shape_floor_on_reuses_every_decode_region():
    table = experiments.s1(pages=(128,), intervals=(256, 512), num_prompts=4)
    for _, row in table.iterrows():
        assert row["sglang-retain:hits"] == "4/4"
        assert int(row["sglang:hits"].split("/")[0]) < 4
        assert row["regressed_requests"] == 0
        assert row["sglang-retain:recomputed"] < row["sglang:recomputed"]


def test_s2_cliff_sits_at_distance_16():
    table = experiments.s2(distances=(15, 16, 17, 100)).set_index("distance")
    assert table.loc[16, "freetoken:cached"] == "1870/1886"
    assert table.loc[17, "freetoken:cached"] == "0/1886"
    assert table.loc[100, "freetoken-lazy:cached"] == "1786/1886"


def test_s3_fanout_vs_append():
    table = experiments.s3()
    rows = {(r.pattern, r.policy): r for r in table.itertuples()}
    assert rows[("fanout", "freetoken")].cached == "0/7780"
    assert rows[("fanout", "freetoken-lazy")].cached == "7700/7780"
    assert rows[("fanout", "freetoken-lazy")].prefill_s < rows[("fanout", "freetoken")].prefill_s / 5
    for policy in ("freetoken", "freetoken-lazy"):
        cached, prompt = map(int, rows[("append", policy)].cached.split("/"))
        assert cached >= prompt - 100


def test_experiment_command_prints_markdown():
    result = invoke("experiment", "s2", "--format", "md")
    assert result.exit_code == 0 and result.output.startswith("| distance |")


def test_every_preset_says_what_it_models():
    result = invoke("policies")
    from sim.engines.registry import PRESETS

    for name, preset in PRESETS.items():
        assert len(preset.about) > 20 and f"{name} " in result.output


@pytest.mark.parametrize("trace_kind", ["s2", "s3"])
def test_replay_mode_equals_timed_mode_when_requests_never_overlap(trace_kind, tmp_path):
    path = tmp_path / "t.jsonl"
    extra = ["--distance", "40"] if trace_kind == "s2" else []
    invoke("trace", "gen", trace_kind, *extra, "-o", str(path))
    outputs = {}
    for mode in ("timed", "replay"):
        result = invoke("simulate", "--trace", str(path), "--policy", "freetoken-lazy", "--model", "gemma-4-26b-a4b",
                        "--mode", mode, "--format", "json")
        outputs[mode] = json.loads(result.stdout)["summary"]
    for key in ("cached_tokens", "recomputed_tokens", "hits", "peak_swa_slots"):
        assert outputs["timed"][key] == outputs["replay"][key], key
    assert outputs["replay"]["makespan_s"] == 0.0  # replay has no time


def test_replay_summary_says_it_has_no_time():
    text = invoke("simulate", "--trace", "traces/fanout.jsonl", "--mode", "replay").output
    for label in ("makespan (s)", "output tokens/s", "TTFT p50 / p90 / p99 (ms)"):
        line = next(line for line in text.splitlines() if line.strip().startswith(label))
        assert line.endswith("none (replay)"), line
    timed = invoke("simulate", "--trace", "traces/fanout.jsonl").output
    assert "none (replay)" not in timed


def test_replay_mode_on_the_mooncake_slice_reports_every_request():
    result = invoke("simulate", "--trace", "traces/mooncake_conversation_500.jsonl", "--mode", "replay", "--format", "json")
    payload = json.loads(result.stdout)["summary"]
    assert payload["requests"] == 500 and payload["num_steps"] == 500 and payload["cached_tokens"] > 0


def test_pool_tokens_alone_keeps_mamba_states_from_memory_and_rejections_are_named():
    result = invoke("simulate", "--trace", "traces/mooncake_conversation_500.jsonl", "--pool-tokens", "100000",
                    "--mode", "replay")
    assert result.exit_code == 0
    assert re.search(r"\n  requests +500 \(5 never ran\)\n", result.output)
    assert "NOTE: 5 request(s) never ran, e.g. mc-98: needs 1894 FULL pages, the pool has 1562" in result.output


def test_summary_counts_evictions():
    payload = json.loads(invoke("simulate", "--trace", "traces/mooncake_conversation_500.jsonl", "--pool-tokens",
                                "100000", "--mode", "replay", "--format", "json").output)["summary"]
    assert payload["evictions_full"] > 0 and payload["rejected_requests"] == 5


def test_simulate_compare_changes_each_percentile_and_each_pool_separately(tmp_path):
    trace = tmp_path / "s1.jsonl"
    write_trace(s1(num_prompts=8), trace)
    result = invoke("simulate", "--trace", str(trace), "--policy", "sglang", "--compare", "sglang-retain",
                    "--chunked-prefill-size", "16384", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    before, after = data["summary"], data["compare"]["summary"]
    table = invoke("simulate", "--trace", str(trace), "--policy", "sglang", "--compare", "sglang-retain",
                   "--chunked-prefill-size", "16384", "--format", "md").output
    ttft = next(line for line in table.splitlines() if line.startswith("| TTFT p50 / p90 / p99 (ms)"))
    shown = [float(v) for v in ttft.split("|")[-2].split(" / ")]
    assert shown == [pytest.approx(1000 * (after[f"ttft_p{p}_s"] - before[f"ttft_p{p}_s"]), rel=0.01, abs=1e-9)
                     for p in (50, 90, 99)]
    evictions = next(line for line in table.splitlines() if line.startswith("| evictions"))
    assert evictions.split("|")[-2].strip() == "0 / 0 / 0"
