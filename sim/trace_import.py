"""Importers for public traces: Mooncake (block-hashed prompts) and Azure LLM inference (lengths only).

Both stream their input and name file:line:field on bad input (a TraceError), like the trace loader.
"""
from __future__ import annotations

import csv
import json
import math
import os
import random
from collections.abc import Iterator
from datetime import datetime

from sim.trace import Request, Segment, Trace, TraceError
from sim.trace_check import is_int

MOONCAKE_BLOCK_LEN = 512
_MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _positive_int(value: object, path: str, line: int, field: str) -> int:
    if not is_int(value) or value <= 0:
        raise TraceError(path, line, field, f"must be a positive integer, got {value!r}")
    return value


def import_mooncake(path: str | os.PathLike, limit: int | None = None) -> Trace:
    """One request a line, ``{"timestamp" (ms), "input_length", "output_length", "hash_ids"}``.

    Each hash id is a 512-token segment ``ref="mc<id>"`` (the last one gets the remainder), so equal ids
    share tokens exactly as Mooncake's prefix-chained block hashes say. Ids are ``mc-<line number>``.
    """
    path = str(path)
    requests, lines, blocks = [], [], {}
    with open(path, encoding="utf-8") as f:
        for line_no, text in enumerate(f, 1):
            if limit is not None and len(requests) >= limit:
                break
            if text.strip():
                previous = requests[-1].arrival if requests else 0.0
                requests.append(_mooncake_request(text, path, line_no, previous, blocks))
                lines.append(line_no)
    if not requests:
        raise TraceError(path, None, "file", "no requests")
    return Trace(requests, path=path, line_numbers=lines)


def _mooncake_request(text: str, path: str, line: int, previous_arrival: float,
                      blocks: dict[int, Segment]) -> Request:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(path, line, "json", f"malformed JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(obj, dict):
        raise TraceError(path, line, "request", "must be a JSON object")
    for field in _MOONCAKE_FIELDS:
        if field not in obj:
            raise TraceError(path, line, field, "missing required field")
    timestamp = obj["timestamp"]
    if not (is_int(timestamp) or isinstance(timestamp, float)) or not 0 <= timestamp < math.inf:
        raise TraceError(path, line, "timestamp", f"must be a number of ms >= 0, got {timestamp!r}")
    if timestamp / 1000 < previous_arrival:
        raise TraceError(path, line, "timestamp", "earlier than the previous line's")
    input_length = _positive_int(obj["input_length"], path, line, "input_length")
    output_length = _positive_int(obj["output_length"], path, line, "output_length")
    return Request(id=f"mc-{line}", arrival=timestamp / 1000, output_len=output_length,
                   prompt=_mooncake_segments(obj["hash_ids"], input_length, path, line, blocks))


def _mooncake_segments(hash_ids: object, input_length: int, path: str, line: int,
                       blocks: dict[int, Segment]) -> list[Segment]:
    """``blocks`` holds one Segment per whole-block hash id, shared by every request that names it."""
    num_blocks = -(-input_length // MOONCAKE_BLOCK_LEN)
    if not isinstance(hash_ids, list) or not all(type(h) is int for h in hash_ids):  # bool is not int here
        raise TraceError(path, line, "hash_ids", "must be a list of integers")
    if len(hash_ids) != num_blocks:
        raise TraceError(path, line, "hash_ids", f"has {len(hash_ids)} ids; input_length {input_length} "
                                                 f"needs ceil({input_length}/512) = {num_blocks}")
    segments = [blocks.get(h) or _whole_block(blocks, h) for h in hash_ids[:-1]]
    last_len = input_length - MOONCAKE_BLOCK_LEN * (num_blocks - 1)
    last = hash_ids[-1]
    segments.append(blocks.get(last) or _whole_block(blocks, last) if last_len == MOONCAKE_BLOCK_LEN
                    else Segment(ref=f"mc{last}", len=last_len))
    return segments


def _whole_block(blocks: dict[int, Segment], hash_id: int) -> Segment:
    # tuple.__new__ skips the named tuple's Python-level constructor: one per distinct block (183k)
    segment = blocks[hash_id] = tuple.__new__(Segment, (f"mc{hash_id}", MOONCAKE_BLOCK_LEN, None, 0))
    return segment


def import_azure(path: str | os.PathLike, prefix_groups: int = 8, shared_len: int = 512, seed: int = 0,
                 limit: int | None = None) -> Trace:
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
    path, rng = str(path), random.Random(seed)
    requests, lines, first_at = [], [], None
    for line, at, row in _azure_rows(path, limit):
        first_at = at if first_at is None else first_at
        group = rng.randrange(prefix_groups)
        requests.append(_azure_request(row, (at - first_at).total_seconds(), group, shared_len, path, line))
        lines.append(line)
    if not requests:
        raise TraceError(path, None, "file", "no requests")
    return Trace(requests, path=path, line_numbers=lines)


def _azure_rows(path: str, limit: int | None) -> Iterator[tuple[int, datetime, list[str]]]:
    """(line number, timestamp, row) of each data row, checked to be in time order."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f)
        _check_azure_header(next(rows, None), path)
        count, previous_at = 0, None
        for row in rows:
            if not row:
                continue
            if limit is not None and count >= limit:
                return
            at = _azure_time(row[0], path, rows.line_num)
            if previous_at is not None and at < previous_at:
                raise TraceError(path, rows.line_num, "TIMESTAMP", "earlier than the previous row's")
            count, previous_at = count + 1, at
            yield rows.line_num, at, row


def _check_azure_header(header: list[str] | None, path: str) -> None:
    if header is None or tuple(h.strip() for h in header) != _AZURE_COLUMNS:
        raise TraceError(path, 1, "header", f"expected {','.join(_AZURE_COLUMNS)}, got {header!r}")


def _azure_time(text: str, path: str, line: int) -> datetime:
    # the CSV carries 7 fractional digits (100 ns); datetime keeps 6, which is plenty for arrivals
    base, _, fraction = text.strip().partition(".")
    try:
        return datetime.fromisoformat(base + ("." + fraction[:6] if fraction else ""))
    except ValueError:
        raise TraceError(path, line, "TIMESTAMP", f"not a date-time: {text!r}") from None


def _azure_request(row: list[str], arrival: float, group: int, shared_len: int, path: str,
                   line: int) -> Request:
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
