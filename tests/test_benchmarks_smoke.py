"""The benchmark scripts on a tiny slice (the 40-line Mooncake head in tests/data), so they do not rot;
and the pieces whose numbers they print: the log-log fit, the peer-aligned hit count."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.peer_kvcache_side import BLOCK_LEN, whole_block_lines
from benchmarks.peer_kvcache_sim import measured_hits
from benchmarks.scaling import fitted_exponent
from sim.run.simulate import SimConfig, simulate
from sim.trace.azure_import import import_mooncake
from tests.benchmark_helpers import HEAD, REPO, run_script


def input_lengths(path: Path, limit: int) -> list[int]:
    return [json.loads(line)["input_length"] for line in path.read_text().splitlines()[:limit]]


@pytest.mark.parametrize("name", ["real_traces.py", "peer_kvcache_sim.py", "scaling.py", "bounds_vs_peer.py", "sglang_timed_counts.py"])
def test_help(name):
    assert "usage:" in run_script(name, "--help")


def test_real_traces_both_modes_report_the_simulation(tmp_path):
    out = run_script("real_traces.py", "--trace", str(HEAD), "--limit", "12", "--json")
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["mode"] for r in results] == ["replay", "timed"]
    replay = simulate(import_mooncake(HEAD, limit=12), SimConfig(mode="replay")).summary
    for r in results:
        assert r["num_requests"] == 12 and r["rejected_requests"] == 0
        assert r["prompt_tokens"] == sum(input_lengths(HEAD, 12))
        assert r["cached_fraction"] == pytest.approx(r["cached_tokens"] / r["prompt_tokens"])
        assert r["peak_rss_mib"] >= r["start_rss_mib"] > 0 and r["wall_s"] > 0
    assert results[0]["cached_tokens"] == replay["cached_tokens"]


def test_real_traces_rejects_a_missing_trace(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "real_traces.py"), "--trace",
                           str(tmp_path / "absent.jsonl")], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "absent.jsonl not found" in done.stderr


def test_scaling_prints_a_table_and_exponent():
    out = run_script("scaling.py", "--trace", str(HEAD), "--sizes", "5,10", "--modes", "replay")
    assert "replay: fitted exponent" in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("replay  ")] == ["5", "10"]


def test_fitted_exponent_recovers_power_laws():
    sizes = [1000, 2000, 4000, 8000]
    assert fitted_exponent(sizes, [0.003 * n for n in sizes]) == pytest.approx(1.0)
    assert fitted_exponent(sizes, [1e-6 * n**2 for n in sizes]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two or more distinct sizes"):
        fitted_exponent([1000, 1000], [1.0, 2.0])


def test_measured_hits_counts_the_last_half_in_whole_blocks():
    rows = pd.DataFrame({"cached_tokens": [5000, 1024, 1500, 2048], "prompt_tokens": [6000, 2000, 3000, 4000],
                         "rejected": ["", "", "", "too big"]})
    assert measured_hits(rows) == (1024, 7000)  # 1500 -> 1024; the rejected row hits nothing


def test_whole_block_lines_cut_partial_tails(write_lines):
    path = write_lines([{"input_length": 1100, "hash_ids": [1, 2, 3]},
                        {"input_length": 300, "hash_ids": [4]}, {"input_length": 1024, "hash_ids": [1, 2]}])
    cut = [json.loads(line) for line in whole_block_lines(path, None)]
    assert cut == [{"input_length": 2 * BLOCK_LEN, "hash_ids": [1, 2]}, {"input_length": 300, "hash_ids": [4]},
                   {"input_length": 1024, "hash_ids": [1, 2]}]
    assert len(whole_block_lines(path, 2)) == 2


def test_peer_side_by_side_on_the_head():
    pytest.importorskip("kvcache_sim")
    out = run_script("peer_kvcache_sim.py", "--trace", str(HEAD), "--budget-blocks", "200",
                     "--backends", "python", "--outputs", "drop", "--repeat", "2")
    rows = {line[:40].strip(): line[40:].split() for line in out.splitlines()
            if line.startswith(("kvcache-simulator", "hybridcache", "peer walk", "ours"))}
    assert set(rows) == {"kvcache-simulator python", "hybridcache replay, prompts only", "peer walk, its counting",
                         "peer walk, our counting", "ours, unbounded", "kvcache-simulator python, whole blocks"}
    assert rows["peer walk, our counting"][:2] == rows["ours, unbounded"][:2]  # hit rate, hit tokens
    assert "vs kvcache-simulator python" in out and "trace " in out and ": 40 requests" in out


def test_unbounded_cache_counts_exactly_as_the_peer_recounted():
    pytest.importorskip("kvcache_sim")
    from benchmarks.peer_kvcache_side import peer_unbounded_recount
    from benchmarks.peer_kvcache_sim import run_ours

    theirs, recounted = peer_unbounded_recount(HEAD, None)
    ours = run_ours(HEAD, None, None, drop_outputs=True, file_order=False)
    assert ours.hit_tokens == recounted.hit_tokens > 0
    assert ours.total_tokens == recounted.total_tokens == sum(input_lengths(HEAD, 40)[20:])
    assert theirs.hit_tokens >= recounted.hit_tokens


def test_adapt_drops_outputs_and_keeps_file_order():
    from benchmarks.peer_kvcache_sim import adapt
    from sim.run.replay import replay_order

    trace = import_mooncake(HEAD)  # its first ten requests share arrival 0.0
    adapted = adapt(trace, HEAD, drop_outputs=True, file_order=True)
    assert replay_order(adapted) == [r.id for r in trace]
    assert {r.output_len for r in adapted} == {1}
    assert [adapted.prompt_len(r.id) for r in adapted] == [trace.prompt_len(r.id) for r in trace]
    assert adapt(trace, HEAD, drop_outputs=False, file_order=False) is trace


def test_belady_equals_the_peers_optimal_on_the_head():
    pytest.importorskip("kvcache_sim")
    out = run_script("bounds_vs_peer.py", "--trace", str(HEAD), "--budget-blocks", "2,60")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(row[0]) for row in rows] == [2, 60]
    for _, peer, ours_on_its_plan, peer_whole, bound, lru, *_ in rows:
        assert peer == ours_on_its_plan and peer_whole == bound and int(lru) <= int(bound)
    assert "MISMATCH" not in out and "VIOLATION" not in out


def test_presets_speed_sets_presets_side_by_side_with_the_bounds_ratio():
    out = run_script("presets_speed.py", "--trace", str(HEAD), "--limit", "12", "--presets", "sglang-retain,vllm",
                     "--modes", "replay", "--bounds", "off,on", "--repeat", "1")
    rows = [line.split() for line in out.splitlines() if line.startswith(("sglang-retain ", "vllm "))]
    assert [(r[0], r[2]) for r in rows] == [("sglang-retain", "off"), ("vllm", "off"), ("sglang-retain", "on"),
                                            ("vllm", "on")]
    assert all(r[4] == "12" for r in rows)
    assert [r[6] for r in rows if r[0] == "sglang-retain"] == ["1.00", "1.00"]  # each against itself
    assert len([line for line in out.splitlines() if "bounds on / off" in line]) == 2


def test_marconi_tuner_groups_counts_the_alphas_groups_on_a_small_pool():
    out = run_script(
        "marconi_tuner_groups.py", "--trace", str(HEAD), "--limit", "40", "--pool-tokens", "20000"
    )
    assert "evictions per alpha" in out and "-> " in out
    runs = next(line for line in out.splitlines() if line.startswith("request runs"))
    per_alpha, grouped = (int(word) for word in runs.replace(",", " ").split() if word.isdigit())
    assert 0 < grouped <= per_alpha


def test_page_chunk_paths_times_the_three_paths_and_the_yardstick():
    out = run_script("page_chunk_paths.py", "--trace", str(HEAD), "--limit", "12", "--repeat", "1")
    times, ratios = out.strip().splitlines()[-2:]
    assert times.startswith("replay, chunk run ") and "sglang-retain replay " in times
    assert ratios.startswith("timed / replay ") and "timed / sglang-retain replay " in ratios


def test_page_chunk_company_splits_every_chunk_by_its_step():
    out = run_script("page_chunk_company.py", "--trace", str(HEAD), "--limit", "12")
    lines = out.strip().splitlines()
    total = int(lines[0].split(": ")[1].split()[0])
    kinds = [int(line.split()[-2]) for line in lines[1:4]]
    assert total > 0 and sum(kinds) == total
    assert lines[4].startswith("alone stretches: ")


def test_sglang_timed_counts_add_up_to_the_step_table():
    out = run_script("sglang_timed_counts.py", "radix", "marconi-sglang", "--trace", str(HEAD), "--limit", "40")
    counts: dict[str, dict[str, int]] = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            policy = counts.setdefault(line, {})
        else:
            num, name = line.split(maxsplit=1)
            policy[name] = int(num)
    assert list(counts) == ["radix", "marconi-sglang"]
    for policy in counts.values():
        full = sum(num for name, num in policy.items() if name.startswith("full step") and "empty" not in name)
        assert policy["batch runs"] > 0 and full > 0
        # an empty full step writes no row; every other step is a full step or a batch run's
        assert full + policy["batch run steps"] == policy["steps in the table"]
    assert counts["marconi-sglang"]["event steps"] > counts["radix"]["event steps"]  # Marconi's last-step checkpoints
