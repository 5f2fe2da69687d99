"""The Mooncake importer: block-hashed prompts, and the multi-turn chains their hashes imply.

One request a line, ``{"timestamp" (ms), "input_length", "output_length", "hash_ids"}``. Each hash id is a
512-token segment ``ref="mc<id>"`` (the last one gets the remainder), so equal ids share tokens exactly
as Mooncake's prefix-chained block hashes say. With ``chains`` (the default) a request that extends an
earlier one's whole prompt becomes its follow-up, with the earlier output in its prompt
(``sim/trace/mooncake_chains.py`` says how and where the hashes stop telling). Ids are ``mc-<line number>``;
arrivals are the recorded timestamps. Bad input raises a TraceError naming file:line:field.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

from sim.align import ceil_div
from sim.gc_pause import collector_paused
from sim.trace.checks import MAX_LEN, MAX_TIME_S, TraceError, is_int, shown
from sim.trace.files import display_name, open_lines, parse_json
from sim.trace.mooncake_chains import (
    MIN_MATCH_BLOCKS,
    MOONCAKE_BLOCK_LEN,
    ChainCounts,
    ChainFinder,
    Parent,
    Turn,
)
from sim.trace.mooncake_chains import output_len_reached as _output_len_reached
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_MAX_TIMESTAMP_MS = MAX_TIME_S * 1000
_HASH_LIMIT = 2**64
# True: the import runs with the cycle collector paused: its segments, requests and strings make no cyclic
# garbage, yet their allocations set off the collector's passes over all the process holds (12,031 requests:
# ~0.1 of ~0.5 CPU s); False: the caller's collector (the reference)
IMPORT_PAUSED = True
# True: a prompt's whole blocks are read as one slice of its ids, its partial first and last blocks apart;
# False: block by block, each block's bounds clipped to the prompt's (the reference)
WHOLE_BLOCKS_SLICED = True


def import_mooncake(
    path: str | os.PathLike,
    limit: int | None = None,
    chains: bool = True,
    min_match_blocks: int = MIN_MATCH_BLOCKS,
    whole_output_only: bool = False,
) -> Trace:
    """The trace alone; ``import_mooncake_counted`` also says what the chain inference found."""
    return import_mooncake_counted(path, limit, chains, min_match_blocks, whole_output_only)[0]


def import_mooncake_counted(
    path: str | os.PathLike,
    limit: int | None = None,
    chains: bool = True,
    min_match_blocks: int = MIN_MATCH_BLOCKS,
    whole_output_only: bool = False,
) -> tuple[Trace, ChainCounts]:
    """``chains=False``: every block a plain segment, no follow-ups (the importer before chains).
    ``min_match_blocks`` and ``whole_output_only``: see ``sim.trace.mooncake_chains.ChainFinder``."""
    name = display_name(path)
    builder = _Builder(ChainFinder(min_match_blocks, whole_output_only) if chains else None)
    with collector_paused() if IMPORT_PAUSED else nullcontext():
        lines = _read(path, name, limit, builder)
        if not lines:
            raise TraceError(name, None, "file", "no requests")
        return Trace(builder.requests, path=name, line_numbers=lines), builder.counts


def _read(path: str | os.PathLike, name: str, limit: int | None, builder: _Builder) -> list[int]:
    """The first ``limit`` requests into ``builder``; their line numbers."""
    lines: list[int] = []
    with open_lines(path) as f:
        for line_no, text in enumerate(f, 1):
            if limit is not None and len(lines) >= limit:
                break
            if text.strip():
                builder.add(_parse(text, name, line_no, builder.last_arrival), line_no)
                lines.append(line_no)
    return lines


class _Builder:
    """Requests in file order; whole blocks are shared Segments (one per distinct block: 183k of them)."""

    def __init__(self, finder: ChainFinder | None):
        self.finder, self.counts = finder, ChainCounts()
        self.requests: list[Request] = []
        self.blocks: dict[int, Segment] = {}
        self.last_arrival = 0.0

    def add(self, record: tuple[float, int, int, list[int]], line: int) -> None:
        arrival, input_len, output_len, hash_ids = record
        turn = Turn(len(self.requests), hash_ids, input_len, output_len)
        parent = self._parent(hash_ids, input_len)
        prompt = self._segments(hash_ids, 0, input_len) if parent is None else self._followup(parent, turn)
        self.requests.append(Request(id=f"mc-{line}", arrival=arrival, output_len=output_len, prompt=prompt))
        self.last_arrival = arrival
        if self.finder is not None:
            self.finder.add(turn)

    def _parent(self, hash_ids: list[int], input_len: int) -> Parent | None:
        if self.finder is None:
            return None
        parent, matched_blocks = self.finder.find_parent(hash_ids, input_len)
        if parent is None and matched_blocks:
            self.counts.short_matches += 1
        return parent

    def _followup(self, parent: Parent, turn: Turn) -> list[Segment]:
        source = self.requests[parent.turn.index]
        reached = _output_len_reached(parent.turn, turn.input_len)
        self.counts.followups += 1
        self.counts.output_cut += reached < parent.turn.output_len
        self.counts.ambiguous += parent.num_candidates > 1
        prompt = list(source.prompt)
        prompt.append(Segment(len=reached, output_of=source.id))
        prompt.extend(self._segments(turn.hash_ids, parent.turn.input_len + reached, turn.input_len))
        return prompt

    def _segments(self, hash_ids: list[int], start: int, end: int) -> list[Segment]:
        """Tokens [start, end) of a prompt, one segment per block they touch (see sim/trace/mooncake_chains.py)."""
        if WHOLE_BLOCKS_SLICED:
            return self._sliced_segments(hash_ids, start, end)
        segments = []
        for index in range(start // MOONCAKE_BLOCK_LEN, len(hash_ids)):
            block_start = index * MOONCAKE_BLOCK_LEN
            first, last = max(start, block_start), min(end, block_start + MOONCAKE_BLOCK_LEN)
            if first >= last:
                break
            hash_id = hash_ids[index]
            if first > block_start:
                segments.append(Segment(ref=f"mc{hash_id}@{first - block_start}", len=last - first))
            elif last - first == MOONCAKE_BLOCK_LEN:
                segments.append(self.blocks.get(hash_id) or self._whole_block(hash_id))
            else:
                segments.append(Segment(ref=f"mc{hash_id}", len=last - first))
        return segments

    def _sliced_segments(self, hash_ids: list[int], start: int, end: int) -> list[Segment]:
        """``_segments`` with the whole blocks in one pass over a slice: [whole_from, whole_to) are the blocks
        that [start, end) holds whole; a partial first block (from inside it) and last (to inside it) apart."""
        num_touched = min(len(hash_ids), ceil_div(end, MOONCAKE_BLOCK_LEN))
        head = start // MOONCAKE_BLOCK_LEN
        if start >= end or head >= num_touched:
            return []
        segments = []
        whole_from = head
        if start > head * MOONCAKE_BLOCK_LEN:
            last = min(end, (head + 1) * MOONCAKE_BLOCK_LEN)
            offset = start - head * MOONCAKE_BLOCK_LEN
            segments.append(Segment(ref=f"mc{hash_ids[head]}@{offset}", len=last - start))
            whole_from = head + 1
        whole_to = min(len(hash_ids), end // MOONCAKE_BLOCK_LEN)
        blocks = self.blocks
        segments.extend([blocks.get(h) or self._whole_block(h) for h in hash_ids[whole_from:whole_to]])
        if whole_from <= whole_to < num_touched:  # the last block, from its start to inside it
            segments.append(Segment(ref=f"mc{hash_ids[whole_to]}", len=end - whole_to * MOONCAKE_BLOCK_LEN))
        return segments

    def _whole_block(self, hash_id: int) -> Segment:
        # tuple.__new__ skips the named tuple's Python-level constructor: one per distinct block
        segment = self.blocks[hash_id] = tuple.__new__(Segment, (f"mc{hash_id}", MOONCAKE_BLOCK_LEN, None, 0))
        return segment


def _parse(text: str, path: str, line: int, previous_arrival: float) -> tuple[float, int, int, list[int]]:
    """(arrival s, input_length, output_length, hash_ids) of one line, every field checked."""
    obj = parse_json(text, path, line)
    if not isinstance(obj, dict):
        raise TraceError(path, line, "request", "must be a JSON object")
    for field in _FIELDS:
        if field not in obj:
            raise TraceError(path, line, field, "missing required field")
    timestamp = obj["timestamp"]
    if not (is_int(timestamp) or isinstance(timestamp, float)) or not 0 <= timestamp < _MAX_TIMESTAMP_MS:
        raise TraceError(
            path,
            line,
            "timestamp",
            f"must be a number of ms >= 0 and < {_MAX_TIMESTAMP_MS:g}, got {shown(timestamp)}",
        )
    if timestamp / 1000 < previous_arrival:
        raise TraceError(path, line, "timestamp", "earlier than the previous line's")
    input_length = _positive_int(obj["input_length"], path, line, "input_length")
    output_length = _positive_int(obj["output_length"], path, line, "output_length")
    return timestamp / 1000, input_length, output_length, _hash_ids(obj["hash_ids"], input_length, path, line)


def _hash_ids(hash_ids: object, input_length: int, path: str, line: int) -> list[int]:
    num_blocks = ceil_div(input_length, MOONCAKE_BLOCK_LEN)
    # bool is not int here; an id beyond 64 bits is no hash a real trace holds
    if not isinstance(hash_ids, list) or not all(
        type(h) is int and -_HASH_LIMIT <= h < _HASH_LIMIT for h in hash_ids
    ):
        raise TraceError(path, line, "hash_ids", "must be a list of integers of at most 64 bits")
    if len(hash_ids) != num_blocks:
        raise TraceError(
            path,
            line,
            "hash_ids",
            f"has {len(hash_ids)} ids; input_length {input_length} "
            f"needs ceil({input_length}/512) = {num_blocks}",
        )
    return hash_ids


def _positive_int(value: object, path: str, line: int, field: str) -> int:
    if not is_int(value) or not 0 < value <= MAX_LEN:
        raise TraceError(path, line, field, f"must be a positive integer <= {MAX_LEN}, got {shown(value)}")
    return value
