"""Fuzzing the command line in-process: hypothesis-made malformed traces, imports and option values.

Whatever the input, a command either runs (exit 0) or refuses it with exit 2 and a message naming where
the problem is (the file, or the option); never a traceback, never a hang. Examples are derandomized (the
same inputs on every run) and each test stops drawing new work past its time budget, so the default run
stays fast; HYBRIDCACHE_FUZZ_EXAMPLES and HYBRIDCACHE_FUZZ_SECONDS raise both for a longer hunt, and
HYBRIDCACHE_FUZZ_RANDOM=1 draws new examples each run.
"""
from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.engines.registry import CLI_KNOBS
from sim.run.config import POOL_KNOBS
from tests.bad_input_helpers import GOOD_LINES, invoke

EXAMPLES = int(os.environ.get("HYBRIDCACHE_FUZZ_EXAMPLES", "120"))
BUDGET_S = float(os.environ.get("HYBRIDCACHE_FUZZ_SECONDS", "20"))
# HYBRIDCACHE_FUZZ_RANDOM=1: fresh random examples each run (a hunt), instead of the same ones
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize=os.environ.get("HYBRIDCACHE_FUZZ_RANDOM") != "1",
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

_EDGE_INTEGERS = st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 2**64, 10**30, 10**400])
_EDGE_FLOATS = st.sampled_from([0.0, -0.0, 1e-300, 1e12, 1e300, float("inf"), float("-inf"), float("nan")])
SCALARS = st.none() | st.booleans() | st.integers() | _EDGE_INTEGERS | st.floats() | _EDGE_FLOATS | st.text(max_size=6)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


class Budget:
    """A test's time budget: past it, the remaining examples return at once."""

    def __init__(self, seconds: float):
        self.seconds, self.started = seconds, None

    def spent(self) -> bool:
        self.started = self.started or time.monotonic()
        return time.monotonic() - self.started > self.seconds


@st.composite
def mutated_lines(draw, lines: list[dict]) -> bytes:
    """Valid lines with one to three mutations: a field replaced, dropped or added (anywhere in the nested
    objects), a line cut short, replaced by random bytes or by deep nesting."""
    lines = json.loads(json.dumps(lines))
    texts = None
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "replace", "drop", "add", "cut", "bytes", "deep"]))
        index = draw(st.integers(0, len(lines) - 1))
        if kind in ("replace", "drop", "add"):
            target = _pick_object(draw, lines[index])
            key = draw(st.sampled_from(sorted(target))) if target and kind != "add" else draw(st.text(max_size=6))
            if kind == "drop":
                target.pop(key, None)
            else:
                target[key] = draw(JSON_VALUES)
        else:
            texts = texts or [json.dumps(line).encode() for line in lines]
            texts[index] = {"cut": lambda t: t[:draw(st.integers(0, len(t)))],
                            "bytes": lambda t: draw(st.binary(max_size=40)).replace(b"\n", b" "),
                            "deep": lambda t: b'{"id": ' + b"[" * 3000 + b"]" * 3000 + b"}"}[kind](texts[index])
    texts = texts or [json.dumps(line).encode() for line in lines]
    return b"".join(t + b"\n" for t in texts)


def _pick_object(draw, obj: dict) -> dict:
    """The request object itself, or one of its prompt segments."""
    segments = [s for s in obj.get("prompt", []) if isinstance(s, dict)] if isinstance(obj.get("prompt"), list) \
        else []
    return draw(st.sampled_from([obj] + segments))


def _check(result, *names: str) -> None:
    assert result.exit_code in (0, 2), f"exit {result.exit_code}: {result.output[-800:]}"
    if result.exit_code == 2:
        assert any(name in result.output for name in names), f"not located ({names}): {result.output[-800:]}"


_TRACE_BUDGET = Budget(BUDGET_S)


@FUZZ
@given(data=mutated_lines(GOOD_LINES))
def test_malformed_traces_are_refused_with_their_place(tmp_path_factory, data):
    if _TRACE_BUDGET.spent():
        return
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(data)
    _check(invoke(["trace", "stats", path, "--format", "json"], seconds=30), str(path))
    _check(invoke(["simulate", "--trace", path, "--mode", "replay", "--format", "json"], seconds=30), str(path))


MOONCAKE_LINES = [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
                  {"timestamp": 10, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 3]}]
_IMPORT_BUDGET = Budget(BUDGET_S / 2)


@FUZZ
@given(data=mutated_lines(MOONCAKE_LINES))
def test_malformed_mooncake_lines_are_refused_with_their_place(tmp_path_factory, data):
    if _IMPORT_BUDGET.spent():
        return
    folder = tmp_path_factory.mktemp("fuzz")
    result = invoke(["trace", "import", "mooncake", folder / "mc.jsonl", "-o", folder / "t.jsonl"]
                    if (folder / "mc.jsonl").write_bytes(data) else [], seconds=30)
    _check(result, str(folder / "mc.jsonl"))
    if result.exit_code == 2:
        assert not (folder / "t.jsonl").exists()


OPTION_TEXTS = (st.integers().map(str) | _EDGE_INTEGERS.map(str) | st.floats().map(repr) | _EDGE_FLOATS.map(repr)
                | st.sampled_from(["none", "on", "off", "tokens", "1e9", "", " 7 ", "0x10", "1_000"]) | st.text(max_size=6))
KNOBS = {**CLI_KNOBS, **POOL_KNOBS}
_OPTION_BUDGET = Budget(BUDGET_S)


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("good") / "good.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in GOOD_LINES))
    return path


@FUZZ
@given(options=st.lists(st.tuples(st.sampled_from(sorted(KNOBS)), OPTION_TEXTS), min_size=1, max_size=3,
                        unique_by=lambda option: option[0]))
def test_option_values_are_refused_naming_the_option(good_trace, options):
    if _OPTION_BUDGET.spent():
        return
    args = [part for name, text in options for part in (KNOBS[name].flag, text)]
    names = [n for name, _ in options for n in (KNOBS[name].flag, name, f"'{name}'")]
    _check(invoke(["simulate", "--trace", good_trace, "--mode", "replay", "--format", "json", *args], seconds=30), *names)


_AXIS_BUDGET = Budget(BUDGET_S / 2)


@FUZZ
@given(options=st.lists(st.tuples(st.sampled_from(sorted(KNOBS)), st.lists(OPTION_TEXTS, min_size=1, max_size=3)),
                        min_size=1, max_size=2, unique_by=lambda option: option[0]))
def test_grid_axes_are_refused_naming_the_axis(tmp_path_factory, good_trace, options):
    if _AXIS_BUDGET.spent():
        return
    out = tmp_path_factory.mktemp("grid") / "out"
    args = [part for name, texts in options for part in (KNOBS[name].flag, ",".join(texts))]
    result = invoke(["grid", "--trace", good_trace, "--mode", "replay", "--jobs", "1", "--out", out, *args], seconds=60)
    # exit 1: some points failed (a knob combination an engine refuses), each named in the output
    assert result.exit_code in (0, 1, 2), result.output[-800:]
    if result.exit_code == 2:
        assert any(KNOBS[name].flag in result.output or name in result.output for name, _ in options), \
            result.output[-800:]
        assert not out.exists()
