"""The `trace` commands: gen, import, stats; bad input exits 2 with file:line:field and writes nothing."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import cli
from sim.trace import load_trace

STATS_KEYS = {"requests", "prompt_tokens", "output_tokens", "arrival_span_s", "fanout_groups",
              "multiturn_chains", "ideal_cached_tokens", "ideal_cached_fraction"}


def _run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_gen_fanout_writes_a_loadable_trace(tmp_path):
    out = tmp_path / "fanout.jsonl"
    result = _run("trace", "gen", "fanout", "--num-groups", 2, "--prompts-per-group", 3, "--request-rate", 5,
                  "--seed", 4, "-o", out)
    assert result.exit_code == 0, result.output
    trace = load_trace(out)
    assert len(trace) == 6 and trace.requests[-1].arrival > 0


@pytest.mark.parametrize("kind, options", [
    ("multiturn", ["--num-sessions", 2, "--num-turns", 2, "--drop-reasoning", 3, "--no-shared-system"]),
    ("s1", ["--num-prompts", 2, "--prompt-len-jitter", 10, "--seed", 1]),
    ("s2", ["--distance", 7]),
    ("s3", ["--mode", "append"]),
])
def test_gen_every_kind(tmp_path, kind, options):
    out = tmp_path / f"{kind}.jsonl"
    result = _run("trace", "gen", kind, *options, "-o", out)
    assert result.exit_code == 0, result.output
    assert len(load_trace(out)) >= 2


@pytest.mark.parametrize("args, phrase", [
    (["fanout", "--num-groups", 0], "--num-groups"),
    (["s2"], "--distance"),
    (["s3", "--mode", "sideways"], "--mode"),
    (["fanout", "--request-rate", "fast"], "--request-rate"),
])
def test_gen_bad_option_exits_2_and_writes_nothing(tmp_path, args, phrase):
    out = tmp_path / "out.jsonl"
    result = _run("trace", "gen", *args, "-o", out)
    assert result.exit_code == 2
    assert phrase in result.stderr
    assert not out.exists()


def test_gen_into_a_missing_folder_exits_2(tmp_path):
    result = _run("trace", "gen", "s3", "-o", tmp_path / "nowhere" / "s3.jsonl")
    assert result.exit_code == 2 and "nowhere" in result.stderr


def test_import_mooncake_then_stats_json(data_dir, tmp_path):
    out = tmp_path / "mc.jsonl"
    result = _run("trace", "import", "mooncake", data_dir / "mooncake_conversation_head.jsonl", "-o", out,
                  "--limit", 10)
    assert result.exit_code == 0, result.output
    result = _run("trace", "stats", out, "--format", "json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert STATS_KEYS <= set(stats) and stats["requests"] == 10


def test_import_azure_with_options(data_dir, tmp_path):
    out = tmp_path / "az.jsonl"
    result = _run("trace", "import", "azure", data_dir / "azure_conv_head.csv", "-o", out,
                  "--prefix-groups", 2, "--shared-len", 100, "--seed", 3)
    assert result.exit_code == 0, result.output
    assert len({r.prompt[0].ref for r in load_trace(out)}) == 2


def test_azure_options_are_refused_for_mooncake(data_dir, tmp_path):
    out = tmp_path / "mc.jsonl"
    result = _run("trace", "import", "mooncake", data_dir / "mooncake_conversation_head.jsonl", "-o", out,
                  "--shared-len", 5)
    assert result.exit_code == 2 and "No such option '--shared-len'" in result.stderr
    assert not out.exists()
    help_text = _run("trace", "import", "mooncake", "--help").stdout
    assert "--min-match-blocks" in help_text and "--shared-len" not in help_text and "--prefix-groups" not in help_text


def test_bad_import_exits_2_names_the_line_and_keeps_the_old_output(write_lines, tmp_path):
    good = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}
    bad = dict(good, hash_ids=[1])
    src = write_lines([good, bad], "mooncake.jsonl")
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    result = _run("trace", "import", "mooncake", src, "-o", out)
    assert result.exit_code == 2
    assert f"{src}:2: hash_ids:" in result.stderr
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mooncake.jsonl", "out.jsonl"]


def test_stats_of_a_bad_trace_exits_2_with_file_line_field(write_lines):
    path = write_lines([{"id": "a", "arrival": 0.0, "prompt": [{"ref": "s", "len": 0}], "output_len": 1}])
    result = _run("trace", "stats", path, "--format", "json")
    assert result.exit_code == 2
    assert f"{path}:1: prompt[0].len:" in result.stderr
    assert result.stdout == ""


def test_stats_of_a_missing_file_exits_2(tmp_path):
    result = _run("trace", "stats", tmp_path / "absent.jsonl")
    assert result.exit_code == 2 and "absent.jsonl" in result.stderr


def test_stats_table(data_dir):
    result = _run("trace", "stats", data_dir / "spec_example.jsonl")
    assert result.exit_code == 0, result.output
    assert "ideal_cached_tokens" in result.stdout and "2,400" in result.stdout
