"""Trace inputs as users have them: gzip, zstd, standard input, and a raw public trace given to simulate."""
from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from cli import cli
from sim.trace import TraceError, load_trace, write_trace
from sim.trace.azure_import import import_azure, import_mooncake

SPEC_LINES = [
    {"id": "a1", "arrival": 0.0, "prompt": [{"ref": "sys", "len": 20}, {"ref": "q1", "len": 4}], "output_len": 5},
    {"id": "a2", "arrival": 1.0, "prompt": [{"ref": "sys", "len": 20}, {"ref": "q1", "len": 4},
                                            {"output_of": "a1"}, {"ref": "q2", "len": 3}], "output_len": 5},
]


def _run(*args, stdin: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin)


def _text(lines) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_gzip_file_loads_like_the_plain_one(tmp_path):
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    plain.write_bytes(_text(SPEC_LINES))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert [r.prompt for r in load_trace(packed)] == [r.prompt for r in load_trace(plain)]


def test_zstd_file_loads(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    path = tmp_path / "t.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(_text(SPEC_LINES)))
    assert len(load_trace(path)) == 2


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(_text(SPEC_LINES) * 50)[:60])
    with pytest.raises(TraceError, match="gzip"):
        load_trace(path)


def test_stats_and_simulate_read_standard_input(tmp_path):
    result = _run("trace", "stats", "-", "--format", "json", stdin=gzip.compress(_text(SPEC_LINES)))
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["requests"] == 2 and stats["followup_requests"] == 1
    result = _run("simulate", "--trace", "-", "--mode", "replay", "--format", "json", stdin=_text(SPEC_LINES))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["followup_requests"] == 1


def test_grid_keeps_a_copy_of_standard_input(tmp_path):
    out = tmp_path / "grid"
    result = _run("grid", "--trace", "-", "--policy", "radix", "--mode", "replay", "--out", out, "--jobs", 1,
                  stdin=_text(SPEC_LINES))
    assert result.exit_code == 0, result.output
    assert (out / "stdin-trace.jsonl").read_bytes() == _text(SPEC_LINES)


def test_imports_read_gzip_and_standard_input(data_dir, tmp_path):
    head = data_dir / "mooncake_conversation_head.jsonl"
    packed = tmp_path / "head.jsonl.gz"
    packed.write_bytes(gzip.compress(head.read_bytes()))
    assert [r.prompt for r in import_mooncake(packed)] == [r.prompt for r in import_mooncake(head)]
    csv = data_dir / "azure_conv_head.csv"
    out = tmp_path / "az.jsonl"
    result = _run("trace", "import", "azure", "-", "-o", out, stdin=gzip.compress(csv.read_bytes()))
    assert result.exit_code == 0, result.output
    assert [r.prompt for r in load_trace(out)] == [r.prompt for r in import_azure(csv)]


@pytest.mark.parametrize("name, fmt", [("mooncake_conversation_head.jsonl", "mooncake"),
                                       ("azure_conv_head.csv", "azure")])
def test_simulate_on_a_raw_public_trace_names_trace_import(data_dir, name, fmt):
    result = _run("simulate", "--trace", data_dir / name, "--mode", "replay")
    assert result.exit_code == 2
    assert f"python cli.py trace import {fmt} {data_dir / name}" in result.stderr


def test_raw_trace_on_standard_input_gets_the_hint_too(data_dir):
    result = _run("trace", "stats", "-", stdin=(data_dir / "mooncake_conversation_head.jsonl").read_bytes())
    assert result.exit_code == 2 and "<stdin>:1:" in result.stderr and "trace import mooncake" in result.stderr


def test_a_bad_own_trace_gets_no_import_hint(write_lines):
    path = write_lines([{"id": "a", "arrival": 0, "prompt": [], "output_len": 1}])
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert "trace import" not in str(caught.value)


def test_import_writes_what_it_found(data_dir, tmp_path):
    out = tmp_path / "mc.jsonl"
    result = _run("trace", "import", "mooncake", data_dir / "mooncake_conversation_head.jsonl", "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"imported {len(load_trace(out))} requests in ")
    assert "follow-ups in" in result.stdout and "fan-out groups" in result.stdout


def test_no_chains_and_option_checks(data_dir, tmp_path):
    out = tmp_path / "mc.jsonl"
    head = data_dir / "mooncake_conversation_head.jsonl"
    assert _run("trace", "import", "mooncake", head, "-o", out, "--no-chains").exit_code == 0
    assert all(s.output_of is None for r in load_trace(out) for s in r.prompt)
    result = _run("trace", "import", "azure", data_dir / "azure_conv_head.csv", "-o", out, "--no-chains")
    assert result.exit_code == 2 and "No such option '--no-chains'" in result.stderr


def test_write_then_gzip_round_trip(tmp_path, write_lines):
    trace = load_trace(write_lines(SPEC_LINES))
    write_trace(trace, tmp_path / "out.jsonl")
    (tmp_path / "out.jsonl.gz").write_bytes(gzip.compress((tmp_path / "out.jsonl").read_bytes()))
    write_trace(load_trace(tmp_path / "out.jsonl.gz"), tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()
