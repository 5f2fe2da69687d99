"""Importers for public traces: Mooncake (block-hashed prompts, sim/trace/mooncake_import.py) and Azure LLM
inference (lengths only, here).

Both stream their input (a file, gzip or zstd, or ``-`` for standard input) and name file:line:field on bad
input (a TraceError), like the trace loader.
"""

from __future__ import annotations

import csv
import os
import random
import re
from collections.abc import Iterator
from datetime import datetime

from sim.trace.checks import MAX_LEN, TraceError, is_int, shown
from sim.trace.files import display_name, open_lines
from sim.trace.mooncake_import import MOONCAKE_BLOCK_LEN, import_mooncake, import_mooncake_counted
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

__all__ = ["MOONCAKE_BLOCK_LEN", "import_azure", "import_mooncake", "import_mooncake_counted"]

_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _positive_int(value: object, path: str, line: int, field: str) -> int:
    if not is_int(value) or not 0 < value <= MAX_LEN:
        raise TraceError(path, line, field, f"must be a positive integer <= {MAX_LEN}, got {shown(value)}")
    return value


def import_azure(
    path: str | os.PathLike,
    prefix_groups: int = 8,
    shared_len: int = 512,
    seed: int = 0,
    limit: int | None = None,
) -> Trace:
    """CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``; arrivals in seconds after the first timestamp.

    The CSV has no prefix information, so a structure is synthesised: each request joins one of
    ``prefix_groups`` groups (uniformly at random from ``seed``) whose members share a system prompt
    ``ref="az-sys-<group>"`` of ``min(shared_len, ContextTokens - 1)`` tokens; the rest of the prompt is
    unique to the request (``ref="az-<line>"``). ``shared_len=0`` gives no sharing at all. The defaults
    are a plausible chat service, not a measurement: sweep them when the answer depends on them.
    Ids are ``az-<line number>``.
    """
    if not is_int(prefix_groups) or prefix_groups < 1:
        raise ValueError(f"import_azure: prefix_groups must be an integer >= 1, got {prefix_groups!r}")
    if not is_int(shared_len) or shared_len < 0:
        raise ValueError(f"import_azure: shared_len must be an integer >= 0, got {shared_len!r}")
    name, rng = display_name(path), random.Random(seed)
    requests, lines, first_at = [], [], None
    for line, at, row in _azure_rows(path, name, limit):
        first_at = at if first_at is None else first_at
        group = rng.randrange(prefix_groups)
        requests.append(_azure_request(row, (at - first_at).total_seconds(), group, shared_len, name, line))
        lines.append(line)
    if not requests:
        raise TraceError(name, None, "file", "no requests")
    return Trace(requests, path=name, line_numbers=lines)


def _azure_rows(
    source: str | os.PathLike, path: str, limit: int | None
) -> Iterator[tuple[int, datetime, list[str]]]:
    """(line number, timestamp, row) of each data row, checked to be in time order; ``path`` names it."""
    with open_lines(source) as f:
        rows = csv.reader(f)
        try:
            _check_azure_header(next(rows, None), path)
            yield from _timed_rows(rows, path, limit)
        except csv.Error as e:  # a field past the csv module's size limit, a stray NUL, ...
            raise TraceError(path, rows.line_num, "row", f"unreadable CSV ({e})") from None


def _timed_rows(rows, path: str, limit: int | None) -> Iterator[tuple[int, datetime, list[str]]]:
    count, previous_at, first_line = 0, None, None
    for row in rows:
        if not row:
            continue
        if limit is not None and count >= limit:
            return
        at = _azure_time(row[0], path, rows.line_num)
        if previous_at is not None and (at.tzinfo is None) != (previous_at.tzinfo is None):
            raise TraceError(
                path,
                rows.line_num,
                "TIMESTAMP",
                f"{'has' if at.tzinfo else 'lacks'} a time "
                f"zone, unlike line {first_line}'s: all timestamps must be local or all zoned",
            )
        if previous_at is not None and at < previous_at:
            raise TraceError(path, rows.line_num, "TIMESTAMP", "earlier than the previous row's")
        count, previous_at, first_line = count + 1, at, first_line or rows.line_num
        yield rows.line_num, at, row


def _check_azure_header(header: list[str] | None, path: str) -> None:
    if header is None or tuple(h.strip() for h in header) != _AZURE_COLUMNS:
        raise TraceError(path, 1, "header", f"expected {','.join(_AZURE_COLUMNS)}, got {header!r}")


# date and time, fractional seconds, an optional zone (Z or +hh:mm)
_TIMESTAMP = re.compile(r"^([^.+Z]+?)(?:\.(\d+))?(Z|[+-]\d\d(?::?\d\d)?)?$")


def _azure_time(text: str, path: str, line: int) -> datetime:
    # the CSV carries 7 fractional digits (100 ns); datetime keeps 6, which is plenty for arrivals
    match = _TIMESTAMP.match(text.strip())
    try:
        if match is None:
            raise ValueError(text)
        base, fraction, zone = match.groups()
        zone = "+00:00" if zone == "Z" else zone or ""
        return datetime.fromisoformat(base + ("." + fraction[:6].ljust(6, "0") if fraction else "") + zone)
    except ValueError:
        raise TraceError(path, line, "TIMESTAMP", f"not a date-time: {shown(text)}") from None


def _azure_request(
    row: list[str], arrival: float, group: int, shared_len: int, path: str, line: int
) -> Request:
    if len(row) != len(_AZURE_COLUMNS):
        raise TraceError(path, line, "row", f"expected {len(_AZURE_COLUMNS)} columns, got {len(row)}")
    context, generated = (_csv_int(row[i], path, line, _AZURE_COLUMNS[i]) for i in (1, 2))
    shared = min(shared_len, context - 1)
    prompt = [Segment(ref=f"az-sys-{group}", len=shared)] if shared > 0 else []
    prompt.append(Segment(ref=f"az-{line}", len=context - shared))
    return Request(id=f"az-{line}", arrival=round(arrival, 6), prompt=prompt, output_len=generated)


def _csv_int(text: str, path: str, line: int, field: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise TraceError(path, line, field, f"not an integer: {text!r}") from None
    return _positive_int(value, path, line, field)
