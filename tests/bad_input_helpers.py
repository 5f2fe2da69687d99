"""Running the CLI in-process on bad input: every rejection must be exit 2 with a located message, never a
traceback, never a hang, and must write nothing."""
from __future__ import annotations

import json
import signal
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner, Result

from cli import cli
from sim.atomic import temp_files

GOOD_LINES = [
    {"id": "a1", "arrival": 0.0, "prompt": [{"ref": "sys", "len": 20}], "output_len": 5},
    {"id": "a2", "arrival": 1.0, "prompt": [{"ref": "sys", "len": 20}, {"output_of": "a1"}], "output_len": 5},
]


class Hang(Exception):
    """A command that did not return within its time limit."""


@contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def invoke(args: list, stdin: bytes | None = None, seconds: int = 60) -> Result:
    """The command's result; a traceback (any exception but click's exit) or a hang fails the caller."""
    with time_limit(seconds):
        result = CliRunner().invoke(cli, [str(a) for a in args], input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args}: traceback instead of a message: "
                             f"{type(result.exception).__name__}: {result.exception}") from result.exception
    return result


def assert_rejected(result: Result, *located: str) -> str:
    """Exit 2, one message naming each of ``located`` (a path, path:line, an option)."""
    message = result.output.strip().splitlines()[-1] if result.output.strip() else ""
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output[-500:]}"
    for place in located:
        assert place in result.output, f"{place!r} not named in: {message}"
    return message


def assert_nothing_written(folder: Path, before: set[str]) -> None:
    after = {str(p.relative_to(folder)) for p in folder.rglob("*")}
    assert after == before, f"left behind: {sorted(after - before)}"
    assert not temp_files(*(p for p in folder.rglob("*") if p.is_dir()), folder)


def lines_text(*lines: dict | str) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
