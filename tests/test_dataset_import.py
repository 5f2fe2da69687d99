"""Importers of the benchmark datasets that carry conversations: ShareGPT / vLLM multi_turn JSON, SGLang
bench_serving's agentic trace and openai JSONL."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import cli
from sim.trace import Segment, TraceError, load_trace
from sim.trace.conversation_import import TextOptions
from sim.trace.dataset_import import import_openai_jsonl, import_sglang_agentic, import_sharegpt
from sim.trace.stats import trace_stats

SHAREGPT = [
    {"id": "c1", "conversations": [
        {"from": "system", "value": "S" * 40},
        {"from": "human", "value": "Q" * 8},
        {"from": "gpt", "value": "A" * 20},
        {"from": "human", "value": "q" * 4},
        {"from": "gpt", "value": "a" * 12},
        {"from": "human", "value": "last"},
    ]},
    {"id": "c2", "conversations": [{"from": "system", "value": "S" * 40}, {"from": "human", "value": "Z" * 8},
                                   {"from": "gpt", "value": "B" * 8}]},
]
VLLM = [{"id": "v1", "messages": [{"role": "user", "content": "Q" * 8}, {"role": "assistant", "content": "A" * 20},
                                  {"role": "user", "content": "q" * 4}]}]


def _write(tmp_path, obj, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_sharegpt_turns_carry_the_servers_replies(tmp_path):
    trace = import_sharegpt(_write(tmp_path, SHAREGPT), TextOptions(chars_per_token=4, think_time=2.0))
    assert [r.id for r in trace] == ["sg0-t1", "sg0-t2", "sg0-t3", "sg1-t1"]
    t1, t2, t3 = (trace.request(f"sg0-t{i}") for i in (1, 2, 3))
    assert (trace.prompt_len(t1.id), t1.output_len) == (10 + 2, 5)  # 40 and 8 characters; reply 20
    assert t2.after == "sg0-t1" and t2.think_time == 2.0 and t2.session == "c1"
    assert t2.prompt[:2] == t1.prompt and t2.prompt[2] == Segment(output_of="sg0-t1")
    assert (trace.prompt_len(t2.id), t2.output_len) == (12 + 5 + 1, 3)
    assert t3.output_len == 256  # no reply recorded: the default
    # the two conversations share the system prompt (same role and text), not the question
    assert trace.prompt_seq("sg0-t1").common_prefix_len(trace.prompt_seq("sg1-t1")) == 10
    stats = trace_stats(trace)
    assert (stats["followup_requests"], stats["multiturn_chains"], stats["ideal_decode_region_hits"]) == (2, 1, 2)


def test_sharegpt_first_turn_only_is_bench_servings_use(tmp_path):
    trace = import_sharegpt(_write(tmp_path, SHAREGPT), TextOptions(max_turns=1))
    assert [r.id for r in trace] == ["sg0-t1", "sg1-t1"] and all(r.after is None for r in trace)


def test_vllm_multiturn_messages(tmp_path):
    trace = import_sharegpt(_write(tmp_path, VLLM), TextOptions(request_rate=2.0, seed=3))
    assert [r.id for r in trace] == ["sg0-t1", "sg0-t2"] and trace.request("sg0-t1").session == "v1"
    assert trace.request("sg0-t2").prompt[1] == Segment(output_of="sg0-t1")


def test_arrivals_are_poisson_by_conversation_and_deterministic(tmp_path):
    many = [dict(c, id=f"c{i}") for i, c in enumerate(SHAREGPT * 5)]
    first = import_sharegpt(_write(tmp_path, many), TextOptions(request_rate=4.0, seed=1))
    again = import_sharegpt(_write(tmp_path, many), TextOptions(request_rate=4.0, seed=1))
    starts = [r.arrival for r in first if r.after is None]
    assert starts == [r.arrival for r in again if r.after is None] and starts == sorted(starts)
    assert starts[0] == 0.0 and len(set(starts)) == 10


def test_agentic_turns_get_the_fixed_output_len(tmp_path):
    data = {"metadata": {}, "conversations": [[
        {"messages": [{"role": "system", "content": "S" * 80}, {"role": "user", "content": "U" * 40}],
         "prompt_tokens": 100},
        {"messages": [{"role": "tool", "content": "T" * 16}], "prompt_tokens": 400},
    ]]}
    trace = import_sglang_agentic(_write(tmp_path, data))
    first, second = trace
    assert first.output_len == second.output_len == 220
    assert second.prompt == first.prompt + [Segment(output_of=first.id), second.prompt[-1]]
    assert trace.prompt_len(second.id) == 20 + 10 + 220 + 4


def test_openai_jsonl_lines_are_independent_requests(tmp_path):
    history = [{"role": "user", "content": "Q" * 8}, {"role": "assistant", "content": "A" * 20}]
    lines = [{"messages": history[:1], "max_tokens": 7},
             {"messages": history + [{"role": "user", "content": "q" * 4}], "max_tokens": 9}]
    path = tmp_path / "req.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    trace = import_openai_jsonl(path)
    assert [r.output_len for r in trace] == [7, 9]
    assert all(s.output_of is None for r in trace for s in r.prompt)  # history is fixed text
    assert trace.prompt_seq("oa-2").common_prefix_len(trace.prompt_seq("oa-1")) == 2


@pytest.mark.parametrize("obj, field", [
    ({"not": "a list"}, "file"),
    ([{"id": "x"}], "[0]"),
    ([{"conversations": [{"from": "martian", "value": "hi"}]}], "[0].conversations[0].from"),
    ([{"messages": [{"role": "user"}]}], "[0].messages[0]"),
    ([{"messages": [{"role": "user", "content": 5}]}], "[0].messages[0].content"),
])
def test_bad_sharegpt_names_the_json_path(tmp_path, obj, field):
    path = _write(tmp_path, obj)
    with pytest.raises(TraceError) as caught:
        import_sharegpt(path)
    assert caught.value.field == field and str(caught.value).startswith(str(path))


def test_bad_openai_line_names_the_line(tmp_path):
    path = tmp_path / "req.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n"
                    + json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}) + "\n")
    with pytest.raises(TraceError, match=r"req.jsonl:2: max_tokens"):
        import_openai_jsonl(path)


@pytest.mark.parametrize("options", [dict(chars_per_token=0), dict(request_rate=-1), dict(max_turns=0),
                                     dict(think_time=float("nan"))])
def test_bad_text_options(options):
    with pytest.raises(ValueError, match=next(iter(options))):
        TextOptions(**options)


def test_cli_imports_a_dataset_and_refuses_foreign_options(tmp_path):
    out = tmp_path / "t.jsonl"
    result = CliRunner().invoke(cli, ["trace", "import", "sharegpt", str(_write(tmp_path, SHAREGPT)), "-o", str(out),
                                      "--max-turns", "2", "--chars-per-token", "2"])
    assert result.exit_code == 0, result.output
    assert "3 requests" in result.stdout and len(load_trace(out)) == 3
    result = CliRunner().invoke(cli, ["trace", "import", "sharegpt", str(_write(tmp_path, SHAREGPT)), "-o", str(out),
                                      "--shared-len", "3"])
    assert result.exit_code == 2 and "No such option '--shared-len'" in result.stderr
