"""The hand-made bad inputs of issue #18, one per defect it found: each is now exit 2 with a message that
names where the problem is (file:line:field, the option, the store file), no traceback, no hang, and
nothing written."""
from __future__ import annotations

import json
import os

import pytest

from tests.bad_input_helpers import GOOD_LINES, assert_nothing_written, assert_rejected, invoke, lines_text

A1 = GOOD_LINES[0]


def _req(**fields) -> dict:
    return {"id": "b", "arrival": 1.0, "prompt": [{"ref": "q", "len": 4}], "output_len": 3} | fields


# (case, trace lines, what the message must name after the file name)
BAD_TRACES = [
    ("id_list", [A1, _req(id=["x"])], ":2: id:"),
    ("id_object", [A1, _req(id={"a": 1})], ":2: id:"),
    ("deep_nesting", [A1, '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}"], ":2: json: nested too deeply"),
    ("number_past_4300_digits", [A1, '{"id": "b", "output_len": 1' + "0" * 5000 + "}"], ":2: json: a number too long"),
    ("skip_false_on_ref", [A1, _req(prompt=[{"ref": "q", "len": 4, "skip": False}])], ":2: prompt[0].skip:"),
    ("skip_null_on_ref", [A1, _req(prompt=[{"ref": "q", "len": 4, "skip": None}])], ":2: prompt[0].skip:"),
    ("skip_null_on_output_of", [A1, _req(prompt=[{"output_of": "a1", "skip": None}])], ":2: prompt[0].skip:"),
    ("len_past_float_range", [A1, _req(prompt=[{"ref": "q", "len": 10**400}])], ":2: prompt[0].len:"),
    ("len_past_31_bits", [A1, _req(prompt=[{"ref": "q", "len": 2**40}])], ":2: prompt[0].len:"),
    ("output_len_past_31_bits", [A1, _req(output_len=2**31)], ":2: output_len:"),
    ("tokens_past_31_bits", [A1, _req(prompt=[{"ref": "q", "len": 2**30}, {"ref": "r", "len": 2**30}])], ":2: prompt:"),
    ("arrival_past_1e12_s", [A1, _req(arrival=1e300)], ":2: arrival:"),
    ("arrival_integer_past_floats", [A1, _req(arrival=10**400)], ":2: arrival:"),
    ("think_time_past_1e12_s", [A1, _req(arrival=None, after="a1", think_time=10**30)], ":2: think_time:"),
    ("not_utf8", [A1, '{"id": "b\udcff"}'], ":2: file: not UTF-8 text: byte 0xff at column 10"),
]


@pytest.mark.parametrize("lines, located", [c[1:] for c in BAD_TRACES], ids=[c[0] for c in BAD_TRACES])
@pytest.mark.parametrize("command", ["simulate", "grid", "stats"])
def test_bad_trace_is_located_by_every_command(tmp_path, lines, located, command):
    path = tmp_path / "t.jsonl"
    path.write_bytes(lines_text(*lines).encode("utf-8", "surrogateescape"))
    before = {p.name for p in tmp_path.iterdir()}
    args = {"simulate": ["simulate", "--trace", path, "--mode", "replay", "--out", tmp_path / "out"],
            "grid": ["grid", "--trace", path, "--mode", "replay", "--out", tmp_path / "grid", "--jobs", "1"],
            "stats": ["trace", "stats", path]}[command]
    assert_rejected(invoke(args), f"{path}{located}")
    assert_nothing_written(tmp_path, before)


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "directory"])
@pytest.mark.parametrize("command", ["simulate", "grid"])
def test_special_files_are_refused_up_front_not_waited_on(tmp_path, make, command):
    special = tmp_path / "special"
    make(special)
    args = ["simulate", "--trace", special] if command == "simulate" else \
        ["grid", "--trace", special, "--out", tmp_path / "grid", "--jobs", "1"]
    assert_rejected(invoke(args, seconds=20), str(special))
    assert not (tmp_path / "grid").exists()


@pytest.fixture
def good_trace(tmp_path):
    path = tmp_path / "good.jsonl"
    path.write_text(lines_text(*GOOD_LINES))
    return path


# (case, options, what the message must name)
BAD_OPTIONS = [
    ("kv_memory_inf", ["--kv-memory-gb", "inf"], "--kv-memory-gb"),
    ("kv_memory_1e308", ["--kv-memory-gb", "1e308"], "--kv-memory-gb"),
    ("kv_memory_nan", ["--kv-memory-gb", "nan"], "--kv-memory-gb"),
    ("pool_tokens_past_31_bits", ["--pool-tokens", str(2**40)], "--pool-tokens"),
    ("pool_tokens_float", ["--pool-tokens", "1e9"], "--pool-tokens"),
    ("window_past_31_bits", ["--window", str(2**40)], "--window"),
    ("swa_floor_past_31_bits", ["--max-running-requests", str(2**31 - 1)], "--max-running-requests"),
    ("chunk_past_31_bits", ["--chunked-prefill-size", str(2**40)], "--chunked-prefill-size"),
    ("memory_budget_past_31_bits", ["--kv-memory-gb", "1000000"], "--kv-memory-gb"),
]


@pytest.mark.parametrize("options, located", [c[1:] for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS])
def test_bad_numbers_are_named_by_their_option(tmp_path, good_trace, options, located):
    before = {p.name for p in tmp_path.iterdir()}
    assert_rejected(invoke(["simulate", "--trace", good_trace, "--out", tmp_path / "out", *options]), located)
    assert_nothing_written(tmp_path, before)


def test_a_billion_mamba_states_cost_nothing_until_used(good_trace):
    result = invoke(["simulate", "--trace", good_trace, "--mamba-states", "1000000000", "--format", "json"], seconds=30)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["rejected_requests"] == 0


def test_the_fit_check_is_the_one_admission_applies(good_trace):
    """SGLang holds 3 states per running request: 2 states reject every request up front, with no retraction."""
    result = invoke(["simulate", "--trace", good_trace, "--policy", "sglang", "--mamba-states", "2", "--format",
                     "json"])
    summary = json.loads(result.stdout)["summary"]
    assert summary["rejected_requests"] == 2 and summary["retractions"] == 0
    result = invoke(["simulate", "--trace", good_trace, "--policy", "sglang", "--mamba-states", "2"])
    assert "needs 3 MAMBA states (the running state + 2 checkpoint slots), the pool has 2" in result.output


def test_explicit_pools_are_not_checked_against_the_memory_budget(good_trace):
    result = invoke(["simulate", "--trace", good_trace, "--pool-tokens", "100000", "--mamba-states", "64",
                     "--kv-memory-gb", "0.000001", "--format", "json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("coefficient", [1e300, 61.0, -1.0])
def test_calibration_coefficients_are_finite_and_sane(tmp_path, good_trace, coefficient):
    calibration = tmp_path / "cal.json"
    calibration.write_text(json.dumps({"model": "inkling", "gpu": "h200", "overhead_s": coefficient,
                                       "s_per_prefill_token": 1e-5, "s_per_decode_token": 1e-5,
                                       "s_per_context_token": 1e-9}))
    assert_rejected(invoke(["simulate", "--trace", good_trace, "--calibration", calibration]), str(calibration),
                    "'overhead_s'")
    grid = invoke(["grid", "--trace", good_trace, "--calibration", calibration, "--out", tmp_path / "g"])
    assert_rejected(grid, str(calibration))


@pytest.mark.parametrize("content", ["[" * 100_000, '{"overhead_s": 1' + "0" * 5000 + "}", "\udcff"])
def test_unreadable_calibration_files_are_named(tmp_path, good_trace, content):
    calibration = tmp_path / "cal.json"
    calibration.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert_rejected(invoke(["simulate", "--trace", good_trace, "--calibration", calibration]), str(calibration))


@pytest.mark.parametrize("generator, options, located", [
    ("multiturn", ["--num-sessions", str(10**12)], "--num-sessions"),
    ("fanout", ["--system-len", str(10**12)], "--system-len"),
    ("multiturn", ["--think-time", "1e300"], "--think-time"),
    ("multiturn", ["--request-rate", "nan"], "--request-rate"),
])
def test_trace_gen_refuses_what_would_not_fit(tmp_path, generator, options, located):
    assert_rejected(invoke(["trace", "gen", generator, *options, "-o", tmp_path / "t.jsonl"], seconds=30), located)
    assert not (tmp_path / "t.jsonl").exists()


_AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BAD_IMPORTS = [
    ("mooncake_huge_timestamp", "mooncake", lines_text({"timestamp": 10**400, "input_length": 1, "output_length": 1,
                                                        "hash_ids": [1]}), ":1: timestamp:"),
    ("mooncake_float_timestamp", "mooncake", lines_text({"timestamp": 1e300, "input_length": 1, "output_length": 1,
                                                         "hash_ids": [1]}), ":1: timestamp:"),
    ("mooncake_huge_hash_id", "mooncake", lines_text({"timestamp": 1, "input_length": 1, "output_length": 1,
                                                      "hash_ids": [2**70]}), ":1: hash_ids:"),
    ("mooncake_huge_length", "mooncake", lines_text({"timestamp": 1, "input_length": 2**40, "output_length": 1,
                                                     "hash_ids": [1]}), ":1: input_length:"),
    ("mooncake_not_utf8", "mooncake", lines_text({"timestamp": 1, "input_length": 1, "output_length": 1,
                                                  "hash_ids": [1]}) + "\udcff\n", ":2: file: not UTF-8"),
    ("mooncake_deep", "mooncake", "[" * 100_000 + "\n", ":1: json: nested too deeply"),
    ("azure_field_past_csv_limit", "azure", _AZURE_HEADER + "2023-11-16 18:15:46.68," + "1" * 200_000 + ",3\n",
     ":2: row: unreadable CSV"),
    ("azure_mixed_zones", "azure", _AZURE_HEADER + "2023-11-16 18:15:46.68,10,3\n2023-11-16 18:15:47+00:00,10,3\n",
     ":3: TIMESTAMP: has a time zone"),
    ("azure_huge_length", "azure", _AZURE_HEADER + "2023-11-16 18:15:46.68,1" + "0" * 30 + ",3\n", ":2: ContextTokens:"),
    ("azure_not_utf8", "azure", _AZURE_HEADER + "2023-11-16 18:15:46.68,10,3\n\udcff,1,2\n", ":3: file: not UTF-8"),
    ("sharegpt_deep", "sharegpt", "[" * 100_000, ":1: json: nested too deeply"),
    ("sharegpt_not_utf8", "sharegpt", '[\n{"id": "\udcff"}]', ":2: file: not UTF-8"),
    ("openai_huge_max_tokens", "openai-jsonl", lines_text({"messages": [{"role": "user", "content": "hi"}],
                                                           "max_tokens": 2**40}), ":1: max_tokens:"),
]


@pytest.mark.parametrize("fmt, text, located", [c[1:] for c in BAD_IMPORTS], ids=[c[0] for c in BAD_IMPORTS])
def test_importers_locate_bad_input(tmp_path, fmt, text, located):
    source = tmp_path / "source"
    source.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert_rejected(invoke(["trace", "import", fmt, source, "-o", tmp_path / "t.jsonl"]), f"{source}{located}")
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("option, value", [("--chars-per-token", "1e-300"), ("--think-time", "1e300"),
                                           ("--request-rate", "nan")])
def test_dataset_import_options_are_bounded(tmp_path, option, value):
    source = tmp_path / "sg.json"
    source.write_text('[{"conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"}]}]')
    result = invoke(["trace", "import", "sharegpt", source, option, value, "-o", tmp_path / "t.jsonl"])
    assert_rejected(result, option)
