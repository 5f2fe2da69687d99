"""`simulate --compare` keeps served and rejected requests apart (issue 25, item 5): a request one run never
served is neither improved nor regressed, and latencies over different served sets are not compared."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli import cli
from commands import simulate_print

# at 2 GB Marconi's vLLM+ baseline (a state every 32 tokens) can serve none of the fan-out's requests
ARGS = [
    "simulate",
    "--trace",
    "traces/fanout.jsonl",
    "--policy",
    "marconi",
    "--compare",
    "marconi-vllm",
    "--model",
    "qwen3.5-4b",
    "--cache-bytes",
    "2e9",
    "--no-bounds",
]


def test_requests_one_run_never_served_are_counted_apart():
    payload = json.loads(CliRunner().invoke(cli, [*ARGS, "--format", "json"], catch_exceptions=False).stdout)
    compared = payload["compare"]
    assert compared["summary"]["rejected_requests"] == 128 and payload["summary"]["rejected_requests"] == 0
    assert compared["served_by_both"] == 0 and compared["served_by_base_only"] == 128
    assert compared["improved_requests"] == compared["regressed_requests"] == 0


def test_latency_changes_are_left_out_when_the_served_requests_differ():
    text = CliRunner().invoke(cli, ARGS, catch_exceptions=False).output
    ttft = next(line for line in text.splitlines() if line.strip().startswith("TTFT"))
    assert ttft.rstrip().endswith("-")  # not "-18.7 / ..." as if a run that served nothing were faster
    assert "of the 0 both served): 0 / 0; served by marconi only: 128" in text
    assert "128 request(s) never ran under marconi-vllm" in text


def test_a_knob_the_compared_policy_refuses_is_refused_before_either_run(monkeypatch):
    def ran(*args, **kwargs):
        raise AssertionError("a run started before the compared policy's knobs were checked")

    monkeypatch.setattr(simulate_print, "simulate", ran)
    result = CliRunner().invoke(cli, ["simulate", "--trace", "traces/fanout.jsonl", "--policy", "vllm", "--model",
                                      "qwen3.5-4b", "--prefill-checkpoints", "off", "--compare", "sglang"])
    assert result.exit_code == 2 and "applies to vllm policies only; 'sglang' runs sglang's rules" in result.output
