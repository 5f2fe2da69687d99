"""The trace format (SPEC section 3): one request a line, prompts as lists of segments.

A segment is either ``{"ref": R, "len": n}`` (the first n tokens of reference R; equal refs mean equal
tokens) or ``{"output_of": X, "len": k, "skip": s}`` (tokens s .. s+k of request X's output; ``len``
defaults to the rest of it). A ``Trace`` is always valid: its constructor checks every rule, so a loaded,
generated or imported trace can be used without further checks, and a bad one is never half-built.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sim.atomic import atomic_open
from sim.tokens import Run, TokenSeq, output_source, ref_source
from sim.trace_check import TraceError, check_requests, is_int
from sim.trace_formats import foreign_format, import_hint
from sim.trace_io import display_name, open_lines, parse_json

__all__ = ["Request", "Segment", "Trace", "TraceError", "load_trace", "request_to_dict", "write_trace"]

_REQUEST_KEYS = ("id", "arrival", "session", "after", "think_time", "prompt", "output_len")
_SEGMENT_KEYS = ("ref", "output_of", "len", "skip")
_SEGMENT_KEY_SET = frozenset(_SEGMENT_KEYS)


class Segment(NamedTuple):  # a tuple: the Mooncake conversation trace makes 183k of them at import
    ref: str | None = None
    len: int | None = None  # required with ref; optional with output_of (None = rest of the output)
    output_of: str | None = None
    skip: int = 0  # output tokens a client dropped (reasoning) before this segment starts


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: str
    arrival: float | None = None  # seconds, open loop; a request with `after` is closed loop
    session: str | None = None
    after: str | None = None  # sent think_time seconds after this request finishes
    think_time: float = 0.0
    prompt: list[Segment]
    output_len: int


class Trace:
    """Requests in file order, looked up by id. Every `after`/`output_of` target comes earlier."""

    def __init__(self, requests: Iterable[Request], *, path: str = "<trace>",
                 line_numbers: Sequence[int] | None = None):
        self.requests: tuple[Request, ...] = tuple(requests)
        lines = list(line_numbers) if line_numbers is not None else range(1, len(self.requests) + 1)
        self._by_id, self._prompt_len = check_requests(self.requests, path, lines)

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.requests)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._by_id

    def request(self, request_id: str) -> Request:
        return self._by_id[request_id]

    def prompt_len(self, request_id: str) -> int:
        return self._prompt_len[request_id]

    def open_loop(self) -> list[Request]:
        """Requests with an arrival time, in arrival order (the checker requires the file to be so)."""
        return [r for r in self.requests if r.after is None]

    def followers(self) -> dict[str, list[str]]:
        """Request id -> the closed-loop requests sent after it finishes, in file order."""
        out: dict[str, list[str]] = {}
        for request in self.requests:
            if request.after is not None:
                out.setdefault(request.after, []).append(request.id)
        return out

    def segment_run(self, segment: Segment) -> Run:
        if segment.ref is not None:
            return (ref_source(segment.ref), 0, segment.len)
        target_len = self._by_id[segment.output_of].output_len
        length = target_len - segment.skip if segment.len is None else segment.len
        return (output_source(segment.output_of), segment.skip, length)

    def prompt_seq(self, request_id: str) -> TokenSeq:
        return TokenSeq([self.segment_run(s) for s in self._by_id[request_id].prompt])

    def output_seq(self, request_id: str) -> TokenSeq:
        return TokenSeq.of(output_source(request_id), self._by_id[request_id].output_len)

    def request_seq(self, request_id: str) -> TokenSeq:
        """The prompt followed by the request's own output: what its KV will hold."""
        request = self._by_id[request_id]
        runs = [self.segment_run(s) for s in request.prompt]
        runs.append((output_source(request_id), 0, request.output_len))
        if all(s.ref is not None for s in request.prompt):
            # ref runs start at offset 0 with len > 0 (checked), so no two of them, and not the
            # request's own output after them, can merge: the runs are normal already
            return TokenSeq._trusted(tuple(runs), self._prompt_len[request_id] + request.output_len)
        return TokenSeq(runs)


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
    name, requests, lines = display_name(path), [], []
    with open_lines(path) as f:
        for line_no, text in enumerate(f, 1):
            if text.strip():
                requests.append(_parse_first(text, name, line_no) if not requests
                                else _parse_request(text, name, line_no))
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
    obj = parse_json(text, path, line)
    _check_keys(obj, _REQUEST_KEYS, ("id", "prompt", "output_len"), "request", path, line)
    prompt = obj["prompt"]
    if not isinstance(prompt, list):
        raise TraceError(path, line, "prompt", "must be a list of segments")
    for index, seg in enumerate(prompt):
        if type(seg) is not dict or not seg.keys() <= _SEGMENT_KEY_SET:
            _check_keys(seg, _SEGMENT_KEYS, (), f"prompt[{index}]", path, line)
        if "skip" in seg and "ref" in seg:
            raise TraceError(path, line, f"prompt[{index}].skip", "only an output_of segment has a skip")
    segments = [Segment(s.get("ref"), s.get("len"), _as_id(s.get("output_of")), s.get("skip", 0)) for s in prompt]
    return Request(id=_as_id(obj["id"]), arrival=_as_float(obj.get("arrival")), session=obj.get("session"),
                   after=_as_id(obj.get("after")), think_time=_as_float(obj.get("think_time", 0.0)),
                   prompt=segments, output_len=obj["output_len"])


def _as_id(value: object) -> object:
    # an integer id is the same request as its decimal string: ids and references are compared as text
    return str(value) if is_int(value) else value


def _as_float(value: object) -> object:
    # ints become floats so that load -> write is canonical; anything else is left for the checker
    if is_int(value) and abs(value) < 2**53:
        return float(value)
    return value


def _check_keys(obj: object, allowed: tuple[str, ...], required: tuple[str, ...], what: str,
                path: str, line: int) -> None:
    if not isinstance(obj, dict):
        raise TraceError(path, line, what, "must be a JSON object")
    for key in obj:
        if key not in allowed:
            raise TraceError(path, line, key if what == "request" else f"{what}.{key}",
                             f"unknown field (allowed: {', '.join(allowed)})")
    for key in required:
        if key not in obj:
            raise TraceError(path, line, key, "missing required field")
