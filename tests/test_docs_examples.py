"""The outputs pasted into the docs are what the code prints now: README.md's quick start, the trace format's
example and error (README.md, docs/trace-format.md) and docs/simulate-example.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import cli
from sim.trace import TraceError, load_trace, write_trace
from sim.trace.generate import s1

REPO = Path(__file__).resolve().parents[1]


def blocks(markdown: str, tag: str = "") -> list[str]:
    """The bodies of the fenced blocks tagged `tag`; untagged ones (the default) are the pasted outputs,
    commands are in ```bash blocks."""
    found, body, body_tag = [], None, None
    for line in markdown.splitlines(keepends=True):
        if line.startswith("```") and body is None:
            body, body_tag = [], line[3:].strip()
        elif line.rstrip() == "```" and body is not None:
            found += ["".join(body)] if body_tag == tag else []
            body = None
        elif body is not None:
            body.append(line)
    return found


def printed(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_readme_quick_start_output_is_what_simulate_prints(monkeypatch):
    monkeypatch.chdir(REPO)
    pasted = blocks((REPO / "README.md").read_text())
    assert printed("simulate", "--trace", "traces/fanout.jsonl") in pasted


def test_the_simulate_example_page_is_what_simulate_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_trace(s1(), tmp_path / "s1.jsonl")
    page = (REPO / "docs" / "simulate-example.md").read_text()
    args = [
        "simulate",
        "--trace",
        "s1.jsonl",
        "--policy",
        "sglang",
        "--compare",
        "sglang-retain",
        "--chunked-prefill-size",
        "16384",
    ]
    assert printed(*args) in blocks(page)
    markdown = page.split("\n---\n")[1].strip()
    assert printed(*args, "--format", "md").strip() == markdown


def test_the_trace_format_example_loads_as_it_reads(tmp_path):
    """README's two-line example is the reference page's, and means what the text says: a2 follows a1 and
    resends a1's prompt and whole output before its own question."""
    (example,) = blocks((REPO / "README.md").read_text(), "json")
    assert blocks((REPO / "docs" / "trace-format.md").read_text(), "json") == [example]
    (tmp_path / "example.jsonl").write_text(example)
    trace = load_trace(tmp_path / "example.jsonl")
    assert trace.prompt_len("a2") == 2048 + 96 + 256 + 40
    first_turn = trace.prompt_len("a1") + 256
    assert trace.prompt_seq("a2").common_prefix_len(trace.request_seq("a1")) == first_turn


def test_the_trace_format_error_example_is_what_the_loader_says(tmp_path, monkeypatch):
    """A request on line 7 resends a1's output skipping 300 of its 256 tokens."""
    first = {"id": "a1", "arrival": 0.0, "prompt": [{"ref": "sys", "len": 64}], "output_len": 256}
    others = [
        {"id": f"b{n}", "arrival": 1.0 + n, "prompt": [{"ref": "sys", "len": 64}], "output_len": 8}
        for n in range(5)
    ]
    prompt = [{"ref": "sys", "len": 64}, {"ref": "q", "len": 8}, {"output_of": "a1", "skip": 300}]
    bad = {"id": "a2", "arrival": 9.0, "prompt": prompt, "output_len": 8}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    Path("traces/bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [first, *others, bad]))
    with pytest.raises(TraceError) as error:
        load_trace("traces/bad.jsonl")
    (pasted,) = blocks((REPO / "docs" / "trace-format.md").read_text())
    assert str(error.value) == pasted.strip()
