r"""The trace's records: a ``Request`` is a prompt of ``Segment``\ s and an output length (docs/trace-format.md);
``sim/trace/trace.py`` holds the checked, indexed set of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


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
