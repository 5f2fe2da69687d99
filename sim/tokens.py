"""Token sequences stored as runs of (source, offset) pairs.

A trace never stores text: a prompt is a list of segments, and equal segment references mean equal
tokens. So the token at offset ``o`` of source ``s`` *is* the pair ``(s, o)``; two sequences agree at a
position exactly when those pairs agree. Keeping runs instead of per-token lists makes a 12k-token
Mooncake prompt a couple of dozen runs, so the radix tree compares and splits keys in O(runs).

Sources are strings: ``"r:<ref>"`` for a trace reference and ``"o:<request id>"`` for a request's
output. Concrete token ids (for the executor's embedding lookup) come from ``token_ids``: a hash of the
source name mixed with the offset, identical on every run and machine.
"""

from __future__ import annotations

import bisect
import hashlib

import numpy as np

Run = tuple[str, int, int]  # (source, first offset, length)

_MASK64 = (1 << 64) - 1

# Off: ``slice`` walks the runs one by one from the one holding its start (the reference the bounds' cut is held
# to: tests/test_tokens.py)
SLICE_BY_BOUNDS = True


def ref_source(ref: str) -> str:
    return "r:" + ref


def output_source(request_id: str) -> str:
    return "o:" + request_id


class TokenSeq:
    """An immutable token sequence; adjacent contiguous runs of one source are merged."""

    __slots__ = ("runs", "length", "_starts")

    def __init__(self, runs: tuple[Run, ...] | list[Run] = (), trusted_length: int = -1):
        if trusted_length >= 0:  # runs cut from a normalised sequence: normalised already
            self.runs: tuple[Run, ...] = tuple(runs)
            self.length = trusted_length
            self._starts: list[int] | None = None
            return
        merged: list[Run] = []
        length = 0
        for source, start, count in runs:
            if count <= 0 or start < 0:
                if count < 0 or start < 0:
                    raise ValueError(f"bad run {(source, start, count)!r}")
                continue
            length += count
            if merged:
                last_source, last_start, last_count = merged[-1]
                if last_source == source and last_start + last_count == start:
                    merged[-1] = (source, last_start, last_count + count)
                    continue
            merged.append((source, start, count))
        self.runs = tuple(merged)
        self.length = length
        self._starts = None

    @classmethod
    def _trusted(cls, runs: tuple[Run, ...], length: int) -> "TokenSeq":
        """Runs cut from a normalised sequence are normalised already: skip the merge."""
        return cls(runs, length)

    def _run_starts(self) -> list[int]:
        starts = self._starts
        if starts is None:  # a plain loop: the compiled core runs it natively (``accumulate`` it cannot)
            starts, position = [], 0
            for run in self.runs:
                starts.append(position)
                position += run[2]
            self._starts = starts
        return starts

    @classmethod
    def of(cls, source: str, length: int, start: int = 0) -> "TokenSeq":
        return cls(((source, start, length),))

    def __len__(self) -> int:
        return self.length

    def __add__(self, other: "TokenSeq") -> "TokenSeq":
        if not self.runs or not other.runs:
            return other if not self.runs else self
        (source, start, count), (other_source, other_start, _) = self.runs[-1], other.runs[0]
        if source == other_source and start + count == other_start:  # the junction merges
            return TokenSeq(self.runs + other.runs)
        return TokenSeq._trusted(self.runs + other.runs, self.length + other.length)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenSeq) and self.runs == other.runs

    def __hash__(self) -> int:
        return hash(self.runs)

    def __repr__(self) -> str:
        return f"TokenSeq({list(self.runs)!r})"

    def slice(self, start: int, end: int | None = None) -> "TokenSeq":
        length = self.length
        end = length if end is None or end > length else end
        start = max(start, 0)
        if start == 0 and end == length:
            return self
        if start >= end:
            return TokenSeq._trusted((), 0)
        starts = self._run_starts()
        first = bisect.bisect_right(starts, start) - 1
        if SLICE_BY_BOUNDS:
            return self._cut(starts, first, start, end)
        out: list[Run] = []
        pos = starts[first]
        for run in self.runs[first:]:
            if pos >= end:
                break
            run_end = pos + run[2]
            if start <= pos and run_end <= end:
                out.append(run)  # whole runs are shared, not rebuilt
            else:
                lo, hi = max(start, pos), min(end, run_end)
                out.append((run[0], run[1] + lo - pos, hi - lo))
            pos = run_end
        return TokenSeq._trusted(tuple(out), end - start)

    def _cut(self, starts: list[int], first: int, start: int, end: int) -> "TokenSeq":
        """``slice``'s runs found by their bounds: the runs starting before ``end`` from ``first`` (the one
        holding ``start``) on, copied as one tuple slice (the loop copies them one by one), then the first
        and last cut to ``start`` and ``end``. Requires ``0 <= start < end <= length``."""
        last = bisect.bisect_left(starts, end, first)  # runs [first, last) hold [start, end)
        source, offset, count = self.runs[first]
        if last - first == 1:  # within one run: a chunk or a page usually is
            return TokenSeq._trusted(((source, offset + start - starts[first], end - start),), end - start)
        out = list(self.runs[first:last])
        if start > starts[first]:
            out[0] = (source, offset + start - starts[first], count - (start - starts[first]))
        source, offset, count = out[-1]
        over = starts[last - 1] + count - end  # what the last run holds past ``end``
        if over > 0:
            out[-1] = (source, offset, count - over)
        return TokenSeq._trusted(tuple(out), end - start)

    def common_prefix_len(self, other: "TokenSeq", other_at: int = 0) -> int:
        """How many leading tokens of ``self`` equal ``other``'s from position ``other_at`` on."""
        ra, rb = self.runs, other.runs
        if other_at >= other.length:
            return 0
        if other_at:
            j = bisect.bisect_right(other._run_starts(), other_at) - 1
            bi = other_at - other._run_starts()[j] if 0 <= j < len(rb) else 0
        else:
            j = bi = 0
        i = ai = matched = 0
        while i < len(ra) and j < len(rb):
            sa, oa, la = ra[i]
            sb, ob, lb = rb[j]
            if sa != sb or oa + ai != ob + bi:
                return matched
            step = min(la - ai, lb - bi)
            matched += step
            ai += step
            bi += step
            if ai == la:
                i, ai = i + 1, 0
            if bi == lb:
                j, bi = j + 1, 0
        return matched

    def first_page(self, page_size: int, at: int = 0) -> tuple[Run, ...]:
        """A hashable key for the page starting at ``at``: a radix node's children are told apart by it."""
        if at >= self.length:
            return ()
        if at:
            starts = self._run_starts()
            index = bisect.bisect_right(starts, at) - 1
            inside = at - starts[index]
        else:  # a node's own key: no run starts needed
            index = inside = 0
        if index < len(self.runs):
            source, offset, length = self.runs[index]
            if length - inside >= page_size:  # the usual case: the page lies within one run
                return ((source, offset + inside, page_size),)
        return self.slice(at, at + page_size).runs

    def token_ids(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Deterministic 63-bit token ids for positions [start, end)."""
        parts = [_run_ids(s, o, n) for s, o, n in self.slice(start, end).runs]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def match_runs(
    runs: tuple[Run, ...],
    index: int,
    inside: int,
    other: tuple[Run, ...],
    at: int,
    at_inside: int,
    limit: int = 2**62,
) -> tuple[int, int, int]:
    """How many tokens of ``runs`` from ``runs[index]``'s ``inside``-th on equal ``other``'s from ``other[at]``'s
    ``at_inside``-th on, counted run by run until they differ, either ends or ``limit`` is reached (then at least
    ``limit``); returns that count and where ``other`` stands after them (its run and the offset in it)."""
    matched = 0
    while matched < limit and index < len(runs) and at < len(other):
        source, offset, count = runs[index]
        other_source, other_offset, other_count = other[at]
        if source != other_source or offset + inside != other_offset + at_inside:
            break
        step = min(count - inside, other_count - at_inside)
        matched, inside, at_inside = matched + step, inside + step, at_inside + step
        if inside == count:
            index, inside = index + 1, 0
        if at_inside == other_count:
            at, at_inside = at + 1, 0
    return matched, at, at_inside


def _source_seed(source: str) -> int:
    return int.from_bytes(hashlib.blake2b(source.encode(), digest_size=8).digest(), "little")


def _run_ids(source: str, first: int, length: int) -> np.ndarray:
    # splitmix64 of (seed + offset): a bijection per source, so ids within a source never collide
    x = (np.uint64(_source_seed(source)) + np.arange(first, first + length, dtype=np.uint64)) & np.uint64(
        _MASK64
    )
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(1)).astype(np.int64)
