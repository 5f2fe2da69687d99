"""The vllm preset from the command line: simulate with its knobs, refusals, the experiments' tables, a grid
over retention x token budget rendered by `report`, and execute's refusal."""
from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from cli import cli
from sim.experiments import vllm as experiments_vllm


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("mode", ["timed", "replay"])
def test_simulate_writes_requests_keyed_by_id(tmp_path, mode):
    result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "vllm", "--model", "qwen3.5-4b",
                    "--retention-interval", "none", "--chunked-prefill-size", "2048", "--page-size", "16",
                    "--mode", mode, "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    requests = pd.read_csv(tmp_path / "requests.csv").set_index("id")
    assert len(requests) == 320 and requests["cached_tokens"].sum() > 0
    assert (requests["cached_tokens"] % 576 == 0).all()  # on an H200 GDN prefill runs on FlashInfer: B = 576


def test_simulate_gemma_and_inkling_run_under_vllm(tmp_path):
    for model in ("gemma-4-26b-a4b", "inkling"):
        result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "vllm", "--model", model,
                        "--window", "512", "--mode", "replay", "--format", "json")
        assert result.exit_code == 0, result.output
        assert '"cached_tokens": ' in result.output


@pytest.mark.parametrize(("options", "message"), [
    (["--retention-interval", "2112"], "multiple of scheduler_block_size 576"),
    (["--pool-tokens", "2000", "--max-model-len", "8192"], "max seq len 8192"),
    (["--finish-trim-gap", "16"], "applies to freetoken policies only"),
])
def test_simulate_refuses_what_vllm_refuses(options, message):
    result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "vllm", "--model", "qwen3.5-4b",
                    *options)
    assert result.exit_code == 2 and message in result.output


def test_requests_longer_than_max_model_len_are_refused_per_request():
    result = invoke("simulate", "--trace", "traces/multiturn.jsonl", "--policy", "vllm", "--model", "qwen3.5-4b",
                    "--max-model-len", "2000", "--mode", "replay")
    assert result.exit_code == 0, result.output
    assert "exceeds vLLM's max_model_len 2000" in result.output


def test_experiment_short_prompt_is_vllm_40696():
    table = experiments_vllm.short_prompt().set_index("prompt")
    assert (table.loc[[100, 300, 480, 527, 528], "0.33.0:cached"] == 0).all()
    assert table.loc[552, "0.33.0:cached"] == 528 and table.loc[552, "recomputed"] == 24
    assert table.loc[979, "recomputed"] == 451
    assert (table["0.33.0:cached"] == table["dense, no junction:cached"]).all()


def test_experiment_align_is_vllm_45238():
    result = invoke("experiment", "vllm-align", "--format", "md")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| 1")]
    assert rows == ["| 1600 / 600 | 0.33.0 | 48/64 | 1584 | 76,032 | 64,768 |  |",
                    "| 1600 / 600 | dense, no junction | 56/64 | 1584 | 88,704 | 52,096 | 52/64 at 1584 |",
                    "| 1600 / 600 | dense, junction | 56/64 | 1584 | 88,704 | 52,096 |  |",
                    "| 1500 / 700 | 0.33.0 | 48/64 | 1056 | 50,688 | 90,112 | 48/64 (interval prototype) |",
                    "| 1500 / 700 | dense, no junction | 0/64 | - | 0 | 140,800 | 0/64 |",
                    "| 1500 / 700 | dense, junction | 48/64 | 1056 | 50,688 | 90,112 | 40/64 at 1056 |"]


def test_experiment_retention_dense_collapses_where_retention_zero_holds():
    table = experiments_vllm.retention(runs=(("gemma-4-26b-a4b", 8192, (500_000,)),)).set_index("retention")
    assert table.loc["none (dense)", "turns Q4"] < 0.7 and table.loc[0, "turns Q4"] > 0.9
    assert table.loc["none (dense)", "evicted SWA"] > 3 * table.loc[0, "evicted SWA"]


@pytest.mark.slow
def test_experiment_retention_full_table():
    result = invoke("experiment", "vllm-retention")
    assert result.exit_code == 0 and "gemma-4-26b-a4b" in result.output and "qwen3.5-4b" in result.output


def test_a_grid_over_retention_and_token_budget_renders(tmp_path):
    out = tmp_path / "grid"
    result = invoke("grid", "--trace", "traces/multiturn.jsonl", "--policy", "vllm", "--model", "qwen3.5-4b",
                    "--prefill-checkpoints", "off", "--retention-interval", "none,0,2112",
                    "--chunked-prefill-size", "2048,8192", "--mode", "replay", "--jobs", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "6 points: 6 ran" in result.output
    result = invoke("report", str(out))
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert "retention_interval" in report and "| 2,112 |" in report


def test_policies_lists_vllm_and_execute_refuses_only_radix():
    assert "vLLM 0.33.0 defaults" in invoke("policies").output
    described = invoke("policies", "--model", "qwen3.5-4b").output
    assert "resolved on h200: block size 576, groups mamba mamba mamba full" in described
    result = invoke("execute", "--trace", "traces/multiturn.jsonl", "--policy", "radix")
    assert result.exit_code == 2 and "it is the upper bound a hybrid cache could reach" in result.output
