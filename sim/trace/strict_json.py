"""Strict JSON, for every JSON hybridcache reads (traces, imports, stores, calibration files): what Python's
``json`` lets through and a user would not expect is refused, with the line and the field.

- A key given twice in one object (``"output_len": 5, "output_len": 500``): ``json`` keeps the last one
  silently, so a run would use a value the author may not have meant.
- A lone surrogate (``"\\ud800"``): not text; it loads, then fails far away when written as UTF-8.
- ``NaN``, ``Infinity`` and numbers past a double's range (``1e400`` reads as infinity): not JSON numbers.
- Nesting past ``MAX_DEPTH`` levels and integers past 4,300 digits (Python's own limits).

The fast path is ``json.loads`` with hooks that only notice a problem; where one was noticed (rare), a
tokenizer walks the text again to say where: line (1-based within the text) and field (``prompt[0].len``).
"""

from __future__ import annotations

import json
import math
import re

MAX_DEPTH = 500  # below where Python's recursion limit stops the JSON parser

_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONG_NUMBER = re.compile(r"\d{4300}")
_INFINITIES = frozenset((math.inf, -math.inf))
_TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")|(?P<punct>[{}\[\]:,])|(?P<word>NaN|-?Infinity)'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|[ \t\r\n]+|true|false|null",
    re.DOTALL,
)


class JSONError(ValueError):
    """JSON that is malformed or that lies. ``line``: 1-based within the text read; ``field``: the JSON path
    (``json`` where the text itself is malformed)."""

    def __init__(self, line: int, field: str, message: str, column: int | None = None):
        self.line, self.field, self.message, self.column = line, field, message, column
        super().__init__(f"line {line}: {field}: {message}")


class _Noticed:
    """The hooks of one parse: they build the values as ``json`` does and note whether any lied (they cost
    about a fifth of the parse; finding where is left to ``first_problem``, which runs only then)."""

    problem = False

    def pairs(self, pairs: list) -> dict:
        value = dict(pairs)
        if len(value) != len(pairs):  # tested, not assigned, on every object: this is the hot path
            self.problem = True
        return value

    def constant(self, name: str) -> float:
        self.problem = True
        return math.nan

    def number(self, text: str) -> float:
        value = float(text)
        if value in _INFINITIES:
            self.problem = True
        return value


def loads(text: str) -> object:
    """``text`` as JSON, strictly; JSONError names the line and the field of the first problem."""
    noticed = _Noticed()
    value = _parsed(
        text, object_pairs_hook=noticed.pairs, parse_constant=noticed.constant, parse_float=noticed.number
    )
    if noticed.problem or ("\\u" in text and _LONE_SURROGATE.search(text)):
        problem = first_problem(text)
        if problem is not None:
            raise JSONError(*problem)
    return value


def _parsed(text: str, **hooks) -> object:
    try:
        return json.loads(text, **hooks)
    except json.JSONDecodeError as e:
        at = min(e.pos, len(text.rstrip("\r\n")))  # past the last line's end: on that line, not the next
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        raise JSONError(line, "json", f"malformed JSON: {e.msg} at column {column}", column) from None
    except RecursionError:
        line, column = _too_deep_at(text)
        raise JSONError(
            line, "json", f"nested too deeply (over {MAX_DEPTH} levels at column {column})"
        ) from None
    except ValueError as e:  # an integer longer than Python converts (4300 digits)
        long = _LONG_NUMBER.search(text)
        line = text.count("\n", 0, long.start()) + 1 if long else 1
        raise JSONError(line, "json", f"a number too long to read ({str(e).split(':')[0]})") from None


def first_problem(text: str) -> tuple[int, str, str] | None:
    """(line, field, message) of the first duplicate key, lone surrogate or non-finite number in ``text``
    (well-formed JSON), or None."""
    walk = _Walk()
    for match in _TOKEN.finditer(text):
        message = walk.step(match.lastgroup, match.group())
        if message is not None:
            return text.count("\n", 0, match.start()) + 1, walk.path() or "json", message
    return None


class _Walk:
    """Where a tokenizer is in the document: a frame per open object or array."""

    def __init__(self) -> None:
        self.frames: list[dict] = []

    def path(self) -> str:
        parts = []
        for frame in self.frames:
            if frame["array"]:
                parts.append(f"[{frame['index']}]")
            elif frame["key"] is not None:
                parts.append(_key_part(frame["key"], first=not parts))
        return "".join(parts)

    def step(self, kind: str | None, token: str) -> str | None:
        frame = self.frames[-1] if self.frames else None
        if kind == "punct":
            self._punct(token)
        elif kind == "word":
            return f"{token} is not a finite number (JSON has no NaN nor Infinity)"
        elif kind == "number" and not token.lstrip("-").isdigit() and math.isinf(float(token)):
            return f"{token[:40]} is not a finite number: past the range of a double (about 1.8e308)"
        elif kind == "string":
            return self._string(json.loads(token), frame)
        return None

    def _punct(self, token: str) -> None:
        if token in "{[":
            self.frames.append(
                {"array": token == "[", "index": 0, "key": None, "keys": set(), "at_key": True}
            )
        elif token in "}]":
            self.frames.pop()
        elif token == ":":  # well-formed JSON (the only kind walked) has ":" and "," only inside a frame
            self.frames[-1]["at_key"] = False
        elif self.frames[-1]["array"]:
            self.frames[-1]["index"] += 1
        else:
            self.frames[-1]["at_key"] = True

    def _string(self, text: str, frame: dict | None) -> str | None:
        # the object this string is a key of; None for a value (or a top-level string)
        owner = frame if frame is not None and not frame["array"] and frame["at_key"] else None
        if owner is not None:
            owner["key"] = text
        if _SURROGATE.search(text):
            what = "text" if owner is None else "key"
            return f"{what} {json.dumps(text)[:40]} holds a lone surrogate (not text)"
        if owner is not None and text in owner["keys"]:
            return "given twice in one object (JSON readers disagree on which one counts)"
        if owner is not None:
            owner["keys"].add(text)
        return None


def _key_part(key: str, first: bool) -> str:
    """A key in a field path: ``.name``, or ``["..."]`` where the name is empty or holds ``.``, ``[`` or ``]``."""
    if not key or any(char in key for char in ".[]"):
        return f"[{json.dumps(key)}]"
    return key if first else f".{key}"


def _too_deep_at(text: str) -> tuple[int, int]:
    """(line, column) of the bracket that opens level ``MAX_DEPTH + 1``: where to look."""
    depth, in_string, escaped = 0, False, False
    for index, char in enumerate(text):
        if in_string:
            in_string, escaped = (char != '"' or escaped), (char == "\\" and not escaped)
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index)
        elif char in "]}":
            depth -= 1
    return 1, 0
