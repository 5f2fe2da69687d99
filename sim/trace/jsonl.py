"""The trace format on disk (docs/trace-format.md): JSON Lines, one request a line, prompts as lists of segments.

A segment is either ``{"ref": R, "len": n}`` (the first n tokens of reference R; equal refs mean equal
tokens) or ``{"output_of": X, "len": k, "skip": s}`` (tokens s .. s+k of request X's output; ``len``
defaults to the rest of it). Loading names the file and line of the first bad request; writing is atomic.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

from sim.atomic import atomic_open
from sim.trace.checks import TraceError, is_int
from sim.trace.files import display_name, open_lines, parse_json
from sim.trace.formats import foreign_format, import_hint
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

_REQUEST_KEYS = ("id", "arrival", "session", "after", "think_time", "prompt", "output_len")
_SEGMENT_KEYS = ("ref", "output_of", "len", "skip")
_SEGMENT_KEY_SET = frozenset(_SEGMENT_KEYS)
_Value = TypeVar("_Value")  # a JSON value as read, its type not checked yet


def request_to_dict(request: Request) -> dict:
    """The canonical JSON object: fixed key order, defaults left out."""
    out: dict = {"id": request.id}
    if request.arrival is not None:
        out["arrival"] = request.arrival
    if request.session is not None:
        out["session"] = request.session
    if request.after is not None:
        out["after"] = request.after
        out["think_time"] = request.think_time
    out["prompt"] = [_segment_to_dict(s) for s in request.prompt]
    out["output_len"] = request.output_len
    return out


def _segment_to_dict(segment: Segment) -> dict:
    if segment.ref is not None:
        return {"ref": segment.ref, "len": segment.len}
    out: dict = {"output_of": segment.output_of}
    if segment.len is not None:
        out["len"] = segment.len
    if segment.skip:
        out["skip"] = segment.skip
    return out


def write_trace(trace: Trace, path: str | os.PathLike) -> None:
    """Write atomically: a reader or a crash never sees a half-written file."""
    with atomic_open(path) as f:
        for request in trace:
            f.write(json.dumps(request_to_dict(request)) + "\n")


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a JSONL trace line by line (plain, gzip or zstd; ``-`` is standard input); any broken rule
    raises TraceError naming file:line:field. A public trace in another format gets a hint naming
    ``trace import``."""
    name = display_name(path)
    requests: list[Request] = []
    lines: list[int] = []
    with open_lines(path) as f:
        for line_no, text in enumerate(f, 1):
            if text.strip():
                requests.append(
                    _parse_first(text, name, line_no) if not requests else _parse_request(text, name, line_no)
                )
                lines.append(line_no)
    if not requests:
        raise TraceError(name, None, "file", "no requests")
    return Trace(requests, path=name, line_numbers=lines)


def _parse_first(text: str, path: str, line: int) -> Request:
    try:
        return _parse_request(text, path, line)
    except TraceError as e:
        fmt = foreign_format(text)
        if fmt is None:
            raise
        raise TraceError(path, line, e.field, f"{e.message}; {import_hint(fmt, path)}") from None


def _parse_request(text: str, path: str, line: int) -> Request:
    obj = _check_keys(
        parse_json(text, path, line), _REQUEST_KEYS, ("id", "prompt", "output_len"), "request", path, line
    )
    prompt = obj["prompt"]
    if not isinstance(prompt, list):
        raise TraceError(path, line, "prompt", "must be a list of segments")
    for index, seg in enumerate(prompt):
        if type(seg) is not dict or not seg.keys() <= _SEGMENT_KEY_SET:
            _check_keys(seg, _SEGMENT_KEYS, (), f"prompt[{index}]", path, line)
        if "skip" in seg and "ref" in seg:
            raise TraceError(path, line, f"prompt[{index}].skip", "only an output_of segment has a skip")
    segments = [
        Segment(s.get("ref"), s.get("len"), _as_id(s.get("output_of")), s.get("skip", 0)) for s in prompt
    ]
    return Request(
        id=_as_id(obj["id"]),
        arrival=_as_float(obj.get("arrival")),
        session=obj.get("session"),
        after=_as_id(obj.get("after")),
        think_time=_as_float(obj.get("think_time", 0.0)),
        prompt=segments,
        output_len=obj["output_len"],
    )


def _as_id(value: _Value) -> _Value | str:
    # an integer id is the same request as its decimal string: ids and references are compared as text
    return str(value) if is_int(value) else value


def _as_float(value: _Value) -> _Value | float:
    # ints become floats so that load -> write is canonical; anything else is left for the checker
    if is_int(value) and abs(value) < 2**53:
        return float(value)
    return value


def _check_keys(
    obj: object, allowed: tuple[str, ...], required: tuple[str, ...], what: str, path: str, line: int
) -> dict[str, Any]:
    """``obj``, a JSON object with only ``allowed`` keys and every ``required`` one. Its values are any JSON
    value: ``Trace`` checks each field's type with the format's other rules (checks.py), naming the field."""
    if not isinstance(obj, dict):
        raise TraceError(path, line, what, "must be a JSON object")
    for key in obj:
        if key not in allowed:
            raise TraceError(
                path,
                line,
                key if what == "request" else f"{what}.{key}",
                f"unknown field (allowed: {', '.join(allowed)})",
            )
    for key in required:
        if key not in obj:
            raise TraceError(path, line, key, "missing required field")
    return obj
