"""The rules of the trace format (docs/trace-format.md), checked request by request in file order.

The first broken rule raises a ``TraceError`` naming the file, the line and the field; nothing is
half-built, because a ``Trace`` only exists once every request has passed.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Sequence
from typing import NoReturn, TypeGuard

from sim.trace.records import Request, Segment

# token positions fit in 31 bits everywhere (the executor's tables, the knobs' MAX_INT): a request's prompt
# and output together stay below 2^31 tokens
MAX_LEN = 2**31 - 1
# about 31,700 years: beyond it a time is a unit mistake (ms or ns given as s), and SimPy's float clock
# would lose sub-millisecond resolution
MAX_TIME_S = 1e12

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 2, 40, 40, 40


def shown(value: object) -> str:
    """A value as an error message quotes it: short however long or deeply nested it is."""
    return _SHOWN.repr(value)


class TraceError(ValueError):
    """Bad trace input. ``str()`` reads ``file:line: field: message``."""

    def __init__(self, path: str, line: int | None, field: str, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field}: {message}")


def check_requests(
    requests: Sequence[Request], path: str, lines: Sequence[int]
) -> tuple[dict[str, Request], dict[str, int]]:
    """Every rule, in file order; returns the requests by id and each prompt's length."""
    checker = _Checker(requests, path, lines)
    checker.check_all()
    return checker.by_id, checker.prompt_len


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[float]:  # an int (not a bool) or a finite float
    return is_int(value) or (isinstance(value, float) and math.isfinite(value))


class _Checker:
    """Checks a trace's requests in order; the first broken rule raises a TraceError."""

    def __init__(self, requests: Sequence[Request], path: str, lines: Sequence[int]):
        self.requests, self.path, self.lines = requests, path, lines
        self.by_id: dict[str, Request] = {}  # the requests checked so far
        self.prompt_len: dict[str, int] = {}
        # id -> line of its first appearance, to explain forward references
        self.first_line: dict[str, int] = {}
        if len(lines) != len(requests):
            raise ValueError(f"{len(lines)} line numbers for {len(requests)} requests")
        for request, line in zip(requests, lines, strict=True):
            if type(request.id) is not str or not request.id:  # before it is hashed: a list id is unhashable
                raise TraceError(
                    path, line, "id", f"must be a non-empty string or an integer, got {shown(request.id)}"
                )
            self.first_line.setdefault(request.id, line)
        self.later = {r.id: r for r in reversed(requests)}
        self.last_open_arrival = -math.inf

    def check_all(self) -> None:
        for request, line in zip(self.requests, self.lines, strict=True):
            self.line = line
            self.prompt_len[request.id] = self.check_request(request)
            self.by_id[request.id] = request

    def fail(self, field: str, message: str) -> NoReturn:
        raise TraceError(self.path, self.line, field, message)

    def check_request(self, r: Request) -> int:
        """Returns the prompt's length."""
        if r.id in self.by_id:
            self.fail("id", f"duplicate id {shown(r.id)} (first at line {self.first_line[r.id]})")
        if r.session is not None and not isinstance(r.session, str):
            self.fail("session", "must be a string")
        self.check_timing(r)
        if not is_int(r.output_len) or not 0 < r.output_len <= MAX_LEN:
            self.fail("output_len", f"must be a positive integer <= {MAX_LEN}, got {shown(r.output_len)}")
        if not isinstance(r.prompt, list) or not r.prompt:
            self.fail("prompt", "must be a non-empty list of segments")
        prompt_len = 0
        for index, seg in enumerate(r.prompt):
            # the common case, a plain ref segment, is checked inline: a call for each of a Mooncake
            # trace's 288k segments was a tenth of its import
            if (
                seg.output_of is None
                and type(seg.ref) is str
                and seg.ref
                and type(seg.len) is int
                and 0 < seg.len <= MAX_LEN
                and type(seg.skip) is int
                and not seg.skip
            ):
                prompt_len += seg.len
            else:
                prompt_len += self.check_segment(r.id, index, seg)
        if prompt_len + r.output_len > MAX_LEN:
            self.fail(
                "prompt",
                f"{prompt_len} prompt tokens + {r.output_len} output tokens exceed {MAX_LEN} "
                "(a request's tokens must fit in 31 bits)",
            )
        return prompt_len

    def check_timing(self, r: Request) -> None:
        if r.arrival is not None and (not is_number(r.arrival) or not 0 <= r.arrival < MAX_TIME_S):
            self.fail(
                "arrival", f"must be a finite number >= 0 and < {MAX_TIME_S:g} s, got {shown(r.arrival)}"
            )
        if not is_number(r.think_time) or not 0 <= r.think_time < MAX_TIME_S:
            self.fail(
                "think_time",
                f"must be a finite number >= 0 and < {MAX_TIME_S:g} s, got {shown(r.think_time)}",
            )
        if r.after is None:
            if r.arrival is None:
                self.fail("arrival", "a request needs an arrival (open loop) or an after (closed loop)")
            if r.think_time:
                self.fail("think_time", "only a closed-loop request (with after) has a think time")
            if r.arrival < self.last_open_arrival:
                self.fail(
                    "arrival",
                    f"{r.arrival} is before the previous open-loop arrival "
                    f"{self.last_open_arrival}; open-loop requests must be in arrival order",
                )
            self.last_open_arrival = r.arrival
        else:
            self.check_target(r.id, "after", r.after)

    def check_target(self, own_id: str, field: str, target: object) -> Request:
        if not isinstance(target, str) or not target:
            self.fail(field, "must be a request id (a non-empty string)")
        if target == own_id:
            self.fail(field, f"{shown(target)} names the request itself: a cycle")
        if target in self.by_id:
            return self.by_id[target]
        if target not in self.later:
            self.fail(field, f"unknown request {shown(target)}")
        cycle = self.after_cycle(own_id, target) if field == "after" else None
        if cycle:
            self.fail(field, "cycle in after: " + " -> ".join(cycle))
        self.fail(
            field,
            f"forward reference to {shown(target)} (line {self.first_line[target]}); "
            "a target must appear earlier in the file",
        )

    def after_cycle(self, own_id: str, target: str) -> list[str] | None:
        chain = [own_id, target]
        while chain[-1] in self.later and chain[-1] not in chain[:-1]:
            nxt = self.later[chain[-1]].after
            if nxt is None:
                return None
            chain.append(nxt)
        return chain if chain[-1] == own_id else None

    def check_segment(self, own_id: str, index: int, s: Segment) -> int:
        """Returns the segment's length."""
        where = f"prompt[{index}]"
        if (s.ref is None) == (s.output_of is None):
            self.fail(where, "a segment has exactly one of ref and output_of")
        if s.len is not None and (not is_int(s.len) or not 0 < s.len <= MAX_LEN):
            self.fail(f"{where}.len", f"must be a positive integer <= {MAX_LEN}, got {shown(s.len)}")
        if s.ref is not None:
            return self.check_ref_segment(where, s)
        return self.check_output_segment(own_id, where, s)

    def check_ref_segment(self, where: str, s: Segment) -> int:
        if not isinstance(s.ref, str) or not s.ref:
            self.fail(f"{where}.ref", "must be a non-empty string")
        if s.len is None:
            self.fail(f"{where}.len", "a ref segment needs a len")
        if type(s.skip) is not int or s.skip:
            self.fail(f"{where}.skip", "only an output_of segment has a skip")
        return s.len

    def check_output_segment(self, own_id: str, where: str, s: Segment) -> int:
        target = self.check_target(own_id, f"{where}.output_of", s.output_of)
        if not is_int(s.skip) or not 0 <= s.skip < target.output_len:
            self.fail(
                f"{where}.skip",
                f"must be an integer in [0, {target.output_len}) "
                f"(output_len of {shown(target.id)}), got {shown(s.skip)}",
            )
        if s.len is not None and s.skip + s.len > target.output_len:
            self.fail(
                f"{where}.len",
                f"skip {s.skip} + len {s.len} exceeds output_len {target.output_len} of {shown(target.id)}",
            )
        return target.output_len - s.skip if s.len is None else s.len
