"""The trace format: loading, every rejected input (named by file:line:field), writing, token sequences."""
from __future__ import annotations

import os

import pytest

import sim.trace.jsonl as trace_module
from sim.tokens import TokenSeq
from sim.trace import Request, Segment, Trace, TraceError, load_trace, write_trace


def _req(request_id: str, arrival: float | None = 0.0, prompt: list | None = None, output_len: int = 8,
         **extra: object) -> dict:
    obj: dict = {"id": request_id}
    if arrival is not None:
        obj["arrival"] = arrival
    obj.update(extra)
    obj["prompt"] = prompt if prompt is not None else [{"ref": "sys", "len": 16}]
    obj["output_len"] = output_len
    return obj


A1 = _req("a1")

# (case, lines, line number of the error, field, a phrase of the message)
BAD_TRACES = [
    ("malformed_json", [A1, '{"id": "a2", "arrival": 1.0,'], 2, "json", "malformed JSON"),
    ("not_an_object", [A1, "[1, 2]"], 2, "request", "JSON object"),
    ("missing_output_len", [{"id": "a1", "arrival": 0.0, "prompt": [{"ref": "s", "len": 1}]}], 1,
     "output_len", "missing"),
    ("missing_prompt", [{"id": "a1", "arrival": 0.0, "output_len": 3}], 1, "prompt", "missing"),
    ("unknown_field", [_req("a1", arival=0.0)], 1, "arival", "unknown field"),
    ("unknown_segment_field", [_req("a1", prompt=[{"ref": "s", "length": 4}])], 1, "prompt[0].length",
     "unknown field"),
    ("id_list", [_req(["x"])], 1, "id", "non-empty string or an integer, got ['x']"),
    ("id_object", [A1, _req({"a": 1})], 2, "id", "non-empty string or an integer"),
    ("id_bool", [_req(True)], 1, "id", "non-empty string or an integer"),
    ("id_float", [_req(1.5)], 1, "id", "non-empty string or an integer"),
    ("after_list", [A1, _req("a2", arrival=None, after=["a1"])], 2, "after", "request id"),
    ("len_mistyped", [_req("a1", prompt=[{"ref": "s", "len": "12"}])], 1, "prompt[0].len", "positive integer"),
    ("len_float", [_req("a1", prompt=[{"ref": "s", "len": 1.5}])], 1, "prompt[0].len", "positive integer"),
    ("len_zero", [_req("a1", prompt=[{"ref": "s", "len": 0}])], 1, "prompt[0].len", "positive integer"),
    ("len_negative", [A1, _req("a2", prompt=[{"ref": "s", "len": 4}, {"ref": "t", "len": -3}])], 2,
     "prompt[1].len", "positive integer"),
    ("output_len_zero", [_req("a1", output_len=0)], 1, "output_len", "positive integer"),
    ("output_len_bool", [_req("a1", output_len=True)], 1, "output_len", "positive integer"),
    ("arrival_mistyped", [_req("a1", arrival="0")], 1, "arrival", "finite number"),
    ("arrival_negative", [_req("a1", arrival=-1.0)], 1, "arrival", "finite number"),
    ("arrival_nan", ['{"id": "a1", "arrival": NaN, "prompt": [{"ref": "s", "len": 1}], "output_len": 1}'], 1,
     "arrival", "finite number"),
    ("ref_without_len", [_req("a1", prompt=[{"ref": "s"}])], 1, "prompt[0].len", "needs a len"),
    ("ref_and_output_of", [A1, _req("a2", prompt=[{"ref": "s", "len": 1, "output_of": "a1"}])], 2,
     "prompt[0]", "exactly one"),
    ("empty_prompt", [_req("a1", prompt=[])], 1, "prompt", "non-empty"),
    ("skip_past_output", [A1, _req("a2", prompt=[{"output_of": "a1", "skip": 8}])], 2, "prompt[0].skip",
     "[0, 8)"),
    ("skip_negative", [A1, _req("a2", prompt=[{"output_of": "a1", "skip": -1}])], 2, "prompt[0].skip", "[0, 8)"),
    ("skip_plus_len_too_long", [A1, _req("a2", prompt=[{"output_of": "a1", "skip": 4, "len": 5}])], 2,
     "prompt[0].len", "exceeds output_len 8"),
    ("skip_on_ref", [_req("a1", prompt=[{"ref": "s", "len": 3, "skip": 1}])], 1, "prompt[0].skip",
     "only an output_of"),
    ("skip_false_on_ref", [_req("a1", prompt=[{"ref": "s", "len": 3, "skip": False}])], 1, "prompt[0].skip",
     "only an output_of"),
    ("skip_null_on_ref", [_req("a1", prompt=[{"ref": "s", "len": 3, "skip": None}])], 1, "prompt[0].skip",
     "only an output_of"),
    ("skip_null", [A1, _req("a2", prompt=[{"output_of": "a1", "skip": None}])], 2, "prompt[0].skip",
     "got None"),
    ("skip_false", [A1, _req("a2", prompt=[{"output_of": "a1", "skip": False}])], 2, "prompt[0].skip",
     "got False"),
    ("len_past_31_bits", [_req("a1", prompt=[{"ref": "s", "len": 2**31}])], 1, "prompt[0].len",
     "<= 2147483647"),
    ("len_past_float_range", [_req("a1", prompt=[{"ref": "s", "len": 10**400}])], 1, "prompt[0].len",
     "<= 2147483647, got 1000"),
    ("output_len_past_31_bits", [_req("a1", output_len=2**31)], 1, "output_len", "<= 2147483647"),
    ("request_past_31_bits", [_req("a1", prompt=[{"ref": "s", "len": 2**30}, {"ref": "t", "len": 2**30}])], 1,
     "prompt", "exceed 2147483647"),
    ("arrival_past_1e12", [_req("a1", arrival=1e12)], 1, "arrival", "< 1e+12 s"),
    ("arrival_huge_integer", [_req("a1", arrival=10**30)], 1, "arrival", "< 1e+12 s"),
    ("think_time_past_1e12", [A1, _req("a2", arrival=None, after="a1", think_time=1e300)], 2, "think_time",
     "< 1e+12 s"),
    ("nested_too_deeply", ['{"id": ' + "[" * 5000 + "]" * 5000 + "}"], 1, "json", "nested too deeply"),
    ("number_too_long", ['{"id": "a", "output_len": 1' + "0" * 5000 + "}"], 1, "json", "number too long"),
    ("unknown_output_of", [A1, _req("a2", prompt=[{"ref": "s", "len": 2}, {"output_of": "zz"}])], 2,
     "prompt[1].output_of", "unknown request 'zz'"),
    ("forward_output_of", [_req("a1", prompt=[{"output_of": "a2"}]), _req("a2", arrival=1.0)], 1,
     "prompt[0].output_of", "forward reference"),
    ("own_output", [_req("a1", prompt=[{"output_of": "a1"}])], 1, "prompt[0].output_of", "itself"),
    ("unknown_after", [A1, _req("a2", arrival=None, after="zz")], 2, "after", "unknown request 'zz'"),
    ("forward_after", [A1, _req("a2", arrival=None, after="a3"), _req("a3", arrival=2.0)], 2, "after",
     "forward reference to 'a3' (line 3)"),
    ("cycle_after", [A1, _req("b", arrival=None, after="c"), _req("c", arrival=None, after="b")], 2, "after",
     "cycle in after: b -> c -> b"),
    ("self_after", [_req("a1", arrival=None, after="a1")], 1, "after", "cycle"),
    ("arrival_not_monotonic", [A1, _req("a2", arrival=5.0), _req("a3", arrival=4.0)], 3, "arrival",
     "before the previous open-loop arrival"),
    ("duplicate_id", [A1, _req("a2", arrival=1.0), _req("a1", arrival=2.0)], 3, "id",
     "duplicate id 'a1' (first at line 1)"),
    ("neither_arrival_nor_after", [A1, _req("a2", arrival=None)], 2, "arrival", "needs an arrival"),
    ("think_time_without_after", [_req("a1", think_time=1.0)], 1, "think_time", "closed-loop"),
    ("think_time_negative", [A1, _req("a2", arrival=None, after="a1", think_time=-1.0)], 2, "think_time",
     ">= 0"),
    ("session_mistyped", [_req("a1", session=3)], 1, "session", "string"),
]


@pytest.mark.parametrize("lines, line, field, phrase", [case[1:] for case in BAD_TRACES],
                         ids=[case[0] for case in BAD_TRACES])
def test_bad_trace_is_rejected_naming_file_line_field(write_lines, lines, line, field, phrase):
    path = write_lines(lines)
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert phrase in message
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)


def test_blank_lines_are_skipped_and_line_numbers_still_count_them(write_lines):
    path = write_lines([A1, "", "   ", _req("a2", arrival=-1.0)])
    with pytest.raises(TraceError, match=r":4: arrival:"):
        load_trace(path)


def test_empty_file_is_rejected(write_lines):
    with pytest.raises(TraceError, match="no requests"):
        load_trace(write_lines([""]))


def test_not_utf8_is_rejected_with_its_line_and_column(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": "a", "arrival": 0, "prompt": [{"ref": "s", "len": 1}], "output_len": 1}\n{"id": "\xff"}\n')
    with pytest.raises(TraceError, match=r"bad.jsonl:2: file: not UTF-8 text: byte 0xff at column 9"):
        load_trace(path)


def test_integer_ids_are_their_decimal_strings(write_lines):
    trace = load_trace(write_lines([_req(1), _req(2, arrival=None, after=1,
                                                   prompt=[{"ref": "sys", "len": 16}, {"output_of": 1}])]))
    assert [r.id for r in trace] == ["1", "2"]
    assert trace.request("2").after == "1" and trace.request("2").prompt[1].output_of == "1"


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "directory"])
def test_special_files_are_refused_before_they_are_opened(tmp_path, make):
    path = tmp_path / "trace"
    make(path)  # a FIFO with no writer would block open() forever
    with pytest.raises(TraceError, match=r"trace: file: is a (FIFO|directory)"):
        load_trace(path)


def test_spec_example_loads(data_dir):
    trace = load_trace(data_dir / "spec_example.jsonl")
    assert [r.id for r in trace] == ["a1", "a2"]
    a2 = trace.request("a2")
    assert (a2.after, a2.think_time, a2.session, a2.arrival) == ("a1", 0.0, "s1", 1.5)
    assert a2.prompt[2] == Segment(output_of="a1")
    assert trace.prompt_len("a1") == 2048 + 96
    assert trace.prompt_len("a2") == 2048 + 96 + 256 + 40
    assert "a1" in trace and "zz" not in trace and len(trace) == 2


def test_prompt_seq_turns_segments_into_runs(data_dir):
    trace = load_trace(data_dir / "spec_example.jsonl")
    assert trace.prompt_seq("a2").runs == (("r:sys", 0, 2048), ("r:q-a1", 0, 96), ("o:a1", 0, 256),
                                           ("r:q-a2", 0, 40))
    assert trace.output_seq("a1") == TokenSeq.of("o:a1", 256)
    # turn 2 starts with turn 1's whole prompt + output
    a1_full = trace.prompt_seq("a1") + trace.output_seq("a1")
    assert trace.prompt_seq("a2").common_prefix_len(a1_full) == len(a1_full)


def test_request_seq_is_prompt_then_own_output_with_runs_merged():
    first = Request(id="a", arrival=0.0, prompt=[Segment(ref="s", len=4), Segment(ref="s", len=4)], output_len=100)
    # the two output_of segments are contiguous in a's output: their runs merge
    joined = Request(id="b", after="a", prompt=[Segment(output_of="a", len=30), Segment(output_of="a", skip=30)],
                     output_len=7)
    trace = Trace([first, joined])
    assert trace.request_seq("a").runs == (("r:s", 0, 4), ("r:s", 0, 4), ("o:a", 0, 100))
    assert trace.request_seq("b").runs == (("o:a", 0, 100), ("o:b", 0, 7))
    for traced in (trace, load_trace("traces/multiturn.jsonl"), load_trace("traces/mooncake_conversation_500.jsonl")):
        for request in traced:
            expected = traced.prompt_seq(request.id) + traced.output_seq(request.id)
            got = traced.request_seq(request.id)
            assert (got.runs, len(got)) == (expected.runs, len(expected))
            assert got.runs == TokenSeq(list(got.runs)).runs  # normal: nothing left to merge


def test_output_of_with_skip_and_len_selects_that_slice():
    first = Request(id="a", arrival=0.0, prompt=[Segment(ref="s", len=4)], output_len=100)
    skip_only = Request(id="b", after="a", prompt=[Segment(output_of="a", skip=30)], output_len=1)
    skip_len = Request(id="c", after="a", prompt=[Segment(output_of="a", skip=30, len=20)], output_len=1)
    trace = Trace([first, skip_only, skip_len])
    assert trace.prompt_seq("b") == TokenSeq.of("o:a", 70, start=30)  # len defaults to output_len - skip
    assert trace.prompt_seq("c") == TokenSeq.of("o:a", 20, start=30)
    assert (trace.prompt_len("b"), trace.prompt_len("c")) == (70, 20)


def test_in_memory_traces_are_checked_too():
    good = Request(id="a", arrival=0.0, prompt=[Segment(ref="s", len=4)], output_len=1)
    with pytest.raises(TraceError, match=r"<trace>:2: id: duplicate"):
        Trace([good, good])


def test_write_then_load_round_trips_byte_identically(data_dir, tmp_path):
    trace = load_trace(data_dir / "spec_example.jsonl")
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    write_trace(trace, first)
    reloaded = load_trace(first)
    write_trace(reloaded, second)
    assert first.read_bytes() == second.read_bytes()
    assert reloaded.requests == trace.requests


def test_writer_uses_canonical_key_order_and_omits_defaults(tmp_path):
    requests = [Request(output_len=3, prompt=[Segment(ref="s", len=2)], arrival=0, id="a"),
                Request(id="b", session="x", after="a", prompt=[Segment(output_of="a", skip=1)], output_len=2)]
    path = tmp_path / "t.jsonl"
    write_trace(Trace(requests), path)
    assert path.read_text().splitlines() == [
        '{"id": "a", "arrival": 0, "prompt": [{"ref": "s", "len": 2}], "output_len": 3}',
        '{"id": "b", "session": "x", "after": "a", "think_time": 0.0, "prompt": [{"output_of": "a", "skip": 1}],'
        ' "output_len": 2}',
    ]


def test_integer_times_load_as_floats(write_lines):
    trace = load_trace(write_lines([_req("a1", arrival=3), _req("a2", arrival=None, after="a1", think_time=2)]))
    assert trace.request("a1").arrival == 3.0 and isinstance(trace.request("a1").arrival, float)
    assert isinstance(trace.request("a2").think_time, float)


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(data_dir, tmp_path, monkeypatch):
    trace = load_trace(data_dir / "spec_example.jsonl")
    path = tmp_path / "out.jsonl"
    path.write_text("old\n")
    calls = []

    def broken(request):
        calls.append(request.id)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return {"id": request.id}

    monkeypatch.setattr(trace_module, "request_to_dict", broken)
    with pytest.raises(RuntimeError):
        write_trace(trace, path)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
