"""Importers: slices of the real Mooncake and Azure traces (tests/data) and every rejected input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.trace import Segment, TraceError, load_trace, write_trace
from sim.trace.azure_import import import_azure, import_mooncake
from sim.trace.stats import trace_stats


def _mooncake_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["mooncake_conversation_head.jsonl", "mooncake_synthetic_head.jsonl"])
def test_mooncake_blocks_become_512_token_refs(data_dir, name):
    path = data_dir / name
    trace = import_mooncake(path)
    originals = _mooncake_lines(path)
    assert len(trace) == len(originals)
    for line_no, (request, original) in enumerate(zip(trace, originals, strict=True), 1):
        assert request.id == f"mc-{line_no}"
        assert request.arrival == original["timestamp"] / 1000
        assert request.output_len == original["output_length"]
        assert [s.ref for s in request.prompt] == [f"mc{h}" for h in original["hash_ids"]]
        assert all(s.len == 512 for s in request.prompt[:-1])
        assert trace.prompt_len(request.id) == original["input_length"]
        # whole blocks are shared Segment objects, equal to the plainly built ones
        assert request.prompt[:-1] == [Segment(ref=f"mc{h}", len=512) for h in original["hash_ids"][:-1]]


def test_mooncake_equal_hash_ids_share_tokens(data_dir):
    trace = import_mooncake(data_dir / "mooncake_conversation_head.jsonl")
    # every conversation line starts with block 0 (a common system prompt), then its own blocks
    assert trace.prompt_seq("mc-1").common_prefix_len(trace.prompt_seq("mc-2")) == 512


def test_mooncake_limit_and_round_trip(data_dir, tmp_path):
    trace = import_mooncake(data_dir / "mooncake_conversation_head.jsonl", limit=7)
    assert len(trace) == 7
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_trace(trace, first)
    write_trace(load_trace(first), second)
    assert first.read_bytes() == second.read_bytes()


def _mc(timestamp=0, input_length=600, output_length=5, hash_ids=(1, 2)) -> dict:
    return {"timestamp": timestamp, "input_length": input_length, "output_length": output_length,
            "hash_ids": list(hash_ids)}


MOONCAKE_BAD = [
    ("hash_ids_too_few", [_mc(), _mc(input_length=1100)], 2, "hash_ids", "ceil(1100/512) = 3"),
    ("hash_ids_too_many", [_mc(input_length=512)], 1, "hash_ids", "needs ceil(512/512) = 1"),
    ("hash_ids_mistyped", [_mc(hash_ids=("a", "b"))], 1, "hash_ids", "list of integers"),
    ("missing_field", [{"timestamp": 0, "input_length": 5, "hash_ids": [1]}], 1, "output_length", "missing"),
    ("output_zero", [_mc(output_length=0)], 1, "output_length", "positive integer"),
    ("input_mistyped", [_mc(input_length="600")], 1, "input_length", "positive integer"),
    ("timestamp_backwards", [_mc(timestamp=3000), _mc(timestamp=2999)], 2, "timestamp", "earlier"),
    ("timestamp_negative", [_mc(timestamp=-1)], 1, "timestamp", ">= 0"),
    ("malformed_json", [_mc(), "{nope"], 2, "json", "malformed JSON"),
]


@pytest.mark.parametrize("lines, line, field, phrase", [c[1:] for c in MOONCAKE_BAD],
                         ids=[c[0] for c in MOONCAKE_BAD])
def test_bad_mooncake_is_rejected_naming_file_line_field(write_lines, lines, line, field, phrase):
    path = write_lines(lines, "mooncake.jsonl")
    with pytest.raises(TraceError) as caught:
        import_mooncake(path)
    assert str(caught.value).startswith(f"{path}:{line}: {field}: ")
    assert phrase in str(caught.value)


def test_azure_arrivals_are_relative_and_prefixes_synthesised(data_dir):
    path = data_dir / "azure_conv_head.csv"
    trace = import_azure(path, prefix_groups=3, shared_len=400, seed=0)
    rows = path.read_text().splitlines()[1:]
    assert len(trace) == len(rows) == 30
    first = trace.request("az-2")
    assert first.arrival == 0.0
    assert trace.request("az-3").arrival == pytest.approx(50.9951690 - 46.6805900, abs=1e-6)
    for line_no, row in enumerate(rows, 2):
        _, context, generated = row.split(",")
        request = trace.request(f"az-{line_no}")
        assert trace.prompt_len(request.id) == int(context) and request.output_len == int(generated)
        shared = request.prompt[0]
        assert shared.ref.startswith("az-sys-") and shared.len == min(400, int(context) - 1)
    assert len({r.prompt[0].ref for r in trace}) == 3


def test_azure_groups_depend_on_the_seed_only(data_dir):
    path = data_dir / "azure_conv_head.csv"
    groups = [[r.prompt[0].ref for r in import_azure(path, seed=s)] for s in (1, 1, 2)]
    assert groups[0] == groups[1] != groups[2]


def test_azure_without_sharing(data_dir):
    trace = import_azure(data_dir / "azure_conv_head.csv", shared_len=0, limit=5)
    assert len(trace) == 5 and all(len(r.prompt) == 1 for r in trace)
    assert trace_stats(trace)["ideal_cached_tokens"] == 0


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
AZURE_BAD = [
    ("bad_header", ["TIME,Context,Generated", "2023-11-16 18:15:46.6805900,374,44"], 1, "header"),
    ("bad_time", [AZURE_HEADER, "2023-11-16 18:15:46.6805900,374,44", "yesterday,3,4"], 3, "TIMESTAMP"),
    ("time_backwards", [AZURE_HEADER, "2023-11-16 18:15:46.6,374,44", "2023-11-16 18:15:45.0,3,4"], 3,
     "TIMESTAMP"),
    ("bad_context", [AZURE_HEADER, "2023-11-16 18:15:46.6805900,many,44"], 2, "ContextTokens"),
    ("zero_generated", [AZURE_HEADER, "2023-11-16 18:15:46.6805900,374,0"], 2, "GeneratedTokens"),
    ("short_row", [AZURE_HEADER, "2023-11-16 18:15:46.6805900,374"], 2, "row"),
]


@pytest.mark.parametrize("lines, line, field", [c[1:] for c in AZURE_BAD], ids=[c[0] for c in AZURE_BAD])
def test_bad_azure_is_rejected_naming_file_line_field(write_lines, lines, line, field):
    path = write_lines(lines, "azure.csv")
    with pytest.raises(TraceError) as caught:
        import_azure(path)
    assert str(caught.value).startswith(f"{path}:{line}: {field}: ")


@pytest.mark.parametrize("options", [{"prefix_groups": 0}, {"shared_len": -1}])
def test_bad_azure_options(data_dir, options):
    with pytest.raises(ValueError, match=next(iter(options))):
        import_azure(data_dir / "azure_conv_head.csv", **options)


def test_full_mooncake_conversation_imports_and_analyses(shared_traces):
    # its speed is a benchmark's figure (benchmarks/real_traces.py prints import_s), never a timed test
    trace = import_mooncake(shared_traces / "mooncake" / "conversation_trace.jsonl")
    stats = trace_stats(trace)
    assert stats["requests"] == 12031
    assert 0.3 < stats["ideal_cached_fraction"] < 0.45


def test_sample_mooncake_slice_is_the_first_500_lines(shared_traces, tmp_path):
    out = tmp_path / "slice.jsonl"
    write_trace(import_mooncake(shared_traces / "mooncake" / "conversation_trace.jsonl", limit=500), out)
    sample = Path(__file__).resolve().parent.parent / "traces" / "mooncake_conversation_500.jsonl"
    assert out.read_bytes() == sample.read_bytes()
