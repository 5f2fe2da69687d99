"""The outputs pasted into README.md and docs/simulate-example.md are what the commands print now."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cli import cli
from sim.trace import write_trace
from sim.trace.generate import s1

REPO = Path(__file__).resolve().parents[1]


def blocks(markdown: str) -> list[str]:
    """The bodies of the untagged fenced blocks (the pasted outputs; commands are in ```bash blocks)."""
    found, body, tag = [], None, None
    for line in markdown.splitlines(keepends=True):
        if line.startswith("```") and body is None:
            body, tag = [], line[3:].strip()
        elif line.rstrip() == "```" and body is not None:
            found += ["".join(body)] if not tag else []
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
    args = ["simulate", "--trace", "s1.jsonl", "--policy", "sglang", "--compare", "sglang-retain",
            "--chunked-prefill-size", "16384"]
    assert printed(*args) in blocks(page)
    markdown = page.split("\n---\n")[1].strip()
    assert printed(*args, "--format", "md").strip() == markdown
