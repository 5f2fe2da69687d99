"""The hostile-input corpus: bad inputs to every command, each with what a clean refusal must name.

A case lays its files in a fresh folder (``{d}`` in its arguments and expected places stands for it), runs
the command in-process and is judged: clean is exit 2 with a message naming every expected place, no
traceback, no hang and nothing written or replaced (a FIFO stays a FIFO); a hostile but legal input
(``runs``) must run to exit 0 (naming the places expected, and passing its own check ``after``); an option
value that is legal for some options (``may_run``) may do either. Round two (issue #26:
tests/hostile_inputs_two.py) adds special files, sockets and devices as outputs, a planted temporary file,
injection, bombs, closed standard input, damaged stores and JSON that lies. ``benchmarks/hostile_inputs.py``
counts the clean ones; tests/test_hostile_inputs.py asserts every case is clean.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

from cli import cli
from sim.atomic import temp_files
from sim.engines.registry import CLI_KNOBS
from sim.run.config import POOL_KNOBS
from tests import test_bad_inputs as regression
from tests.bad_input_helpers import GOOD_LINES, Hang, lines_text, time_limit
from tests.hostile_inputs_two import AFTER, CLOSED, PREPARE, SPECIAL, make_special, round_two_cases

FIFO, FOLDER, STORE = "<fifo>", "<folder>", "<store>"  # special contents of a case's file
GOOD = lines_text(*GOOD_LINES).encode()


@dataclass(frozen=True)
class Hostile:
    name: str  # "class/case"
    args: tuple
    files: dict = field(default_factory=dict)  # name -> bytes, FIFO, FOLDER or STORE (a finished grid)
    located: tuple = ()
    runs: bool = False
    may_run: bool = False
    damage: tuple = ()  # (file inside the folder, bytes) written after the files are laid
    origin: str = "corpus"  # "regression": a case tests/test_bad_inputs.py runs already
    stdin: bytes | str | None = None  # what standard input holds; CLOSED: none at all
    prepare: str = ""  # a preparation of hostile_inputs_two.PREPARE, run after the files are laid
    after: str = ""  # a check of hostile_inputs_two.AFTER, run after the command


def _trace_cases() -> list[Hostile]:
    commands = {"simulate": ("simulate", "--trace", "{d}/t.jsonl", "--mode", "replay", "--out", "{d}/out"),
                "grid": ("grid", "--trace", "{d}/t.jsonl", "--mode", "replay", "--out", "{d}/g", "--jobs", "1"),
                "stats": ("trace", "stats", "{d}/t.jsonl")}
    return [Hostile(f"trace/{case}/{command}", args, {"t.jsonl": lines_text(*lines).encode("utf-8", "surrogateescape")},
                    (f"{{d}}/t.jsonl{located}",), origin="regression")
            for case, lines, located in regression.BAD_TRACES for command, args in commands.items()]


def _option_cases() -> list[Hostile]:
    cases = [Hostile(f"option/{case}/{command}", (*base, *options), {"t.jsonl": GOOD}, (located,),
                     origin="regression" if command == "simulate" else "corpus")
             for case, options, located in regression.BAD_OPTIONS
             for command, base in (("simulate", ("simulate", "--trace", "{d}/t.jsonl", "--out", "{d}/out")),
                                   ("grid", ("grid", "--trace", "{d}/t.jsonl", "--out", "{d}/g", "--jobs", "1")))]
    values = ["-1", "nan", "inf", "-inf", str(2**40), "1" + "0" * 400, "1e400", "abc", ""]
    for name, spec in sorted({**CLI_KNOBS, **POOL_KNOBS}.items()):
        if spec.kind in (int, float):
            cases += [Hostile(f"option/{name}={value or 'empty'}", ("simulate", "--trace", "{d}/t.jsonl", "--format", "json",
                                                                    "--mode", "replay", spec.flag, value),
                              {"t.jsonl": GOOD}, (spec.flag,), may_run=True) for value in values]
    cases.append(Hostile("option/mamba_states=1e9", ("simulate", "--trace", "{d}/t.jsonl", "--mamba-states",
                                                     "1000000000", "--format", "json"), {"t.jsonl": GOOD}, runs=True))
    cases += [Hostile(f"grid-axis/{flag}={text}", ("grid", "--trace", "{d}/t.jsonl", "--out", "{d}/g", flag, text),
                      {"t.jsonl": GOOD}, (flag,)) for flag, text in
              [("--page-size", "64,abc"), ("--policy", "sglang,nope"), ("--page-size", ""),
               ("--swa-eviction-interval", str(2**40)), ("--kv-memory-gb", "inf"), ("--mamba-states", "1e9,64")]]
    return cases


def _special_file_cases() -> list[Hostile]:
    readers = {"simulate": ("simulate", "--trace", "{d}/x"), "grid": ("grid", "--trace", "{d}/x", "--out", "{d}/g"),
               "stats": ("trace", "stats", "{d}/x"), "mooncake": ("trace", "import", "mooncake", "{d}/x", "-o", "{d}/o"),
               "azure": ("trace", "import", "azure", "{d}/x", "-o", "{d}/o"),
               "calibration": ("simulate", "--trace", "{d}/t.jsonl", "--calibration", "{d}/x")}
    kinds = {"fifo": FIFO, "folder": FOLDER, "missing": None, "empty": b""}
    return [Hostile(f"special/{kind}/{command}", args, {"t.jsonl": GOOD, **({"x": content} if content is not None
                                                                             else {})},
                    ("{d}/x",), may_run=kind == "empty" and command == "stats")
            for command, args in readers.items() for kind, content in kinds.items()]


def _import_and_gen_cases() -> list[Hostile]:
    cases = [Hostile(f"import/{case}", ("trace", "import", fmt, "{d}/src", "-o", "{d}/t.jsonl"),
                     {"src": text.encode("utf-8", "surrogateescape")}, (f"{{d}}/src{located}",), origin="regression")
             for case, fmt, text, located in regression.BAD_IMPORTS]
    gens = [("multiturn", "--num-sessions", str(10**12)), ("fanout", "--system-len", str(10**12)),
            ("multiturn", "--think-time", "1e300"), ("multiturn", "--request-rate", "nan"),
            ("multiturn", "--num-sessions", "-5"), ("fanout", "--system-len", "1e400")]
    cases += [Hostile(f"gen/{gen}{option}={value}", ("trace", "gen", gen, option, value, "-o", "{d}/t.jsonl"), {},
                      (option,), may_run=value == "-5") for gen, option, value in gens]
    return cases


def _output_cases() -> list[Hostile]:
    return [Hostile("output/simulate-out-is-a-file", ("simulate", "--trace", "{d}/t.jsonl", "--out", "{d}/f"),
                    {"t.jsonl": GOOD, "f": b"x"}, ("{d}/f",)),
            Hostile("output/grid-out-is-a-file", ("grid", "--trace", "{d}/t.jsonl", "--out", "{d}/f"),
                    {"t.jsonl": GOOD, "f": b"x"}, ("{d}/f",)),
            Hostile("output/gen-o-is-a-folder", ("trace", "gen", "s3", "-o", "{d}/f"), {"f": FOLDER}, ("{d}/f",)),
            Hostile("output/gen-o-under-a-file", ("trace", "gen", "s3", "-o", "{d}/f/t.jsonl"), {"f": b"x"},
                    ("{d}/f",)),
            Hostile("output/report-not-a-store", ("report", "{d}/f"), {"f": FOLDER}, ("{d}/f",))]


def _store_cases() -> list[Hostile]:
    damages = [("point-empty-object", "points/{point}.json", b"{}"), ("point-list", "points/{point}.json", b"[]"),
               ("point-not-json", "points/{point}.json", b"{\"key\": "),
               ("manifest-list", "grid.json", b"[]"), ("manifest-not-json", "grid.json", b"\xff"),
               ("requests-truncated", "points/{point}.requests.csv", b"id,arrival_s\nr1,0.0\n"),
               ("steps-header-only", "points/{point}.steps.csv", b"t_s\n"),
               ("requests-empty", "points/{point}.requests.csv", b"")]
    return [Hostile(f"store/{case}", ("report", "{d}/g"), {"g": STORE}, (f"{{d}}/g/{path}",), damage=(path, data))
            for case, path, data in damages]


def _executor_cases() -> list[Hostile]:
    base = ("execute", "--trace", "{d}/t.jsonl")
    return [Hostile(f"execute/{flag}={value}", (*base, flag, value), {"t.jsonl": GOOD}, (flag,))
            for flag, value in [("--pool-tokens", str(2**40)), ("--mamba-states", str(2**40)), ("--seed", str(10**20)),
                                ("--window", str(2**40)), ("--pool-tokens", "8")]] + \
        [Hostile("execute/pools-past-memory", (*base, "--pool-tokens", str(2**31 - 1)), {"t.jsonl": GOOD},
                 ("--pool-tokens",)),
         Hostile("calibrate/pools-past-memory", ("calibrate", "--trace", "{d}/t.jsonl", "--mamba-states",
                                                 str(2**31 - 1), "-o", "{d}/c.json"), {"t.jsonl": GOOD},
                 ("--mamba-states",))]


def all_cases() -> list[Hostile]:
    return [*_trace_cases(), *_option_cases(), *_special_file_cases(), *_import_and_gen_cases(),
            *_output_cases(), *_store_cases(), *_executor_cases(), *round_two_cases(Hostile, FOLDER, STORE, FIFO)]


_STORE_CACHE: dict[str, Path] = {}


def finished_store(scratch: Path, name: str = "store", trace: bytes = GOOD) -> Path:
    """A small finished grid over ``trace``, made once a process and copied into every case that damages it."""
    if name not in _STORE_CACHE:
        (scratch / f"{name}.jsonl").write_bytes(trace)
        CliRunner().invoke(cli, ["grid", "--trace", str(scratch / f"{name}.jsonl"), "--policy", "radix,sglang",
                                 "--out", str(scratch / name), "--jobs", "1"], catch_exceptions=False)
        _STORE_CACHE[name] = scratch / name
    return _STORE_CACHE[name]


def lay_out(case: Hostile, folder: Path, scratch: Path) -> None:
    for name, content in case.files.items():
        path = folder / name
        if content == FIFO:
            os.mkfifo(path)
        elif content == FOLDER:
            path.mkdir()
        elif content == STORE:
            shutil.copytree(finished_store(scratch), path)
        elif content in SPECIAL:
            make_special(path, SPECIAL[content])
        else:
            path.write_bytes(content)
    if case.damage:
        name, data = case.damage
        point = sorted((folder / "g" / "points").glob("*.json"))[0].stem
        (folder / "g" / name.format(point=point)).write_bytes(data)
    if case.prepare:
        PREPARE[case.prepare](folder, scratch)


class _ClosedStdinRunner(CliRunner):
    """A runner whose command finds no standard input at all (``sys.stdin`` None), as under ``<&-``."""

    @contextmanager
    def isolation(self, *args, **kwargs):
        with super().isolation(*args, **kwargs) as streams:
            saved, sys.stdin = sys.stdin, None
            try:
                yield streams
            finally:
                sys.stdin = saved


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: its kind, and a regular file's bytes' hash (a FIFO is never opened)."""
    found = {}
    for path in folder.rglob("*"):
        mode = path.lstat().st_mode
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode) else ""
        found[str(path.relative_to(folder))] = (stat.S_IFMT(mode), digest)
    return found


def judge(case: Hostile, folder: Path, seconds: int = 60) -> str | None:
    """None when the command handled ``case`` cleanly, else what went wrong."""
    points = sorted((folder / "g" / "points").glob("*.json"))
    point = points[0].stem if points else ""

    def sub(text: str) -> str:
        return text.replace("{d}", str(folder)).replace("{point}", point)

    before = snapshot(folder)
    runner = _ClosedStdinRunner() if case.stdin == CLOSED else CliRunner()
    try:
        with time_limit(seconds):
            result = runner.invoke(cli, [sub(str(a)) for a in case.args],
                                   input=None if case.stdin == CLOSED else case.stdin)
    except Hang:
        signal.alarm(0)
        return f"hang: no answer within {seconds} s"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"traceback: {type(result.exception).__name__}: {str(result.exception)[:200]}"
    missing = [sub(place) for place in case.located if sub(place) not in result.output]
    if result.exit_code == 0 and (case.runs or case.may_run):
        if case.runs and missing:
            return f"ran, not naming ({', '.join(missing)}): {result.output.strip()[-200:]}"
        return AFTER[case.after](folder) if case.after else None
    if case.runs or result.exit_code != 2:
        return f"exit {result.exit_code}: {result.output.strip()[-200:]}"
    if missing:
        return f"not located ({', '.join(missing)}): {result.output.strip()[-200:]}"
    after = snapshot(folder)
    if after != before or temp_files(*(p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()), folder):
        changed = sorted(name for name in set(after) | set(before) if after.get(name) != before.get(name))
        return f"left behind or replaced: {changed[:3]}"
    return None


def summary_line(outcomes: dict[str, str | None]) -> str:
    clean = sum(problem is None for problem in outcomes.values())
    return f"{clean} of {len(outcomes)} hostile inputs fail cleanly"


def describe(outcomes: dict[str, str | None]) -> str:
    return json.dumps({name: problem for name, problem in outcomes.items() if problem}, indent=1)
