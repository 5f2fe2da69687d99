"""The why watcher's evicted one-page leaves kept per request, not per leaf (``TreeMissTracker.spans``), and the
read that finds a page among them through its request.

vLLM+'s chunk run evicts an old request's path bottom up, a one-page leaf a chunk, each hung from its request's
tokens (``Node.source``): at 1,000 Mooncake requests ~378k such leaves in ~1.8k runs of one request's pages in a
row, against ~1,000 reads (a match's), 215 of them finding one. Each leaf an entry of ``evicted_pages`` cost its
page's hash and a cold probe of a ~400k-entry table; here a leaf that goes on the last span (its request's, the
span's top page ending where the leaf ends) only moves the span's start, and a span is three ints
``(place in the watcher's sources, start, end)``: the leaves at ``start``, ``start + page``, .., ``end - page``.

A read asks whether a node starting at ``depth`` after a request's tokens, with their page there, was evicted.
Such a leaf's request holds the same token at ``depth``: a token is a ``(source, offset)`` pair, so the runs of
both sequences holding ``depth`` have one source and one ``offset - position``. The spans are indexed by that pair
(``by_token``, each run of a span's request over the span a segment), at the first read after they were made, and
a candidate is taken where ``depth`` is one of its leaves' starts and the reference's two ints agree: the page's
hash (an entry's key) and the prefix's (``prefix_hash``, a sourced entry's int). Switch ``PER_REQUEST`` (off: an
entry a leaf, ``misses_evicted.sourced_entry``, the reference; tests/test_misses_spans_property.py).

A fan-out request evicts ~3 leaves, one span, one segment on a token of its own: a key tuple, a list and four int
objects cost more than the three entries they replace (the 1M fan-out +66 MiB). ``COMPACT``: the segments five
ints each in one ``array`` (``segments``: place, low, high, start, the key's next segment or -1), a key's int the
pair's hash (``token_key``; a candidate is checked as before, so one of another token only widens the search
toward the reference's, which has no token filter), ``heads`` its last segment; a span once indexed is dropped
from ``spans`` (no read asks it again). Off: ``by_token``'s tuples and lists (the reference;
tests/test_misses_spans_property.py).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from typing import Any

from sim.cache.misses_hashing import prefix_hash
from sim.cache.node import Node

PER_REQUEST = True
# True: the index in one ``array`` and int keys, a span dropped once indexed; False: ``by_token`` (the reference)
COMPACT = True

_KEY_BITS = (1 << 60) - 1  # a key's int held in two 30-bit digits (a full 64-bit hash takes three)


class EvictedSpans:
    """``spans``: ``[place, start, end, ..]``, a span three ints; ``num_indexed``: how many of ``spans``' ints are
    in ``by_token`` (a span once indexed is not moved); ``by_token``: ``(source, offset - position)`` -> ``[place,
    low, high, start, ..]``, a segment four ints: the span's run ``[low, high)`` and the span's start; ``COMPACT``:
    ``heads``: ``token_key`` -> its last segment's place in ``segments``, five ints a segment (``next`` last)."""

    def __init__(self) -> None:
        self.spans: list[int] = []
        self.num_indexed = 0
        self.by_token: dict[tuple[str, int], list[int]] = {}
        self.heads: dict[int, int] = {}
        self.segments: Any = array("q")


def held(spans: EvictedSpans) -> bool:
    """Whether any leaf was put on a span (indexed or not)."""
    return bool(spans.spans) or bool(spans.heads) or bool(spans.by_token)


def token_key(source: str, position_offset: int) -> int:
    """``COMPACT``'s key of a token pair ``(source, offset - position)``: its hash, in 60 bits."""
    return hash((source, position_offset)) & _KEY_BITS


def spanned(node: Node, page: int) -> bool:
    """Whether an evicted leaf hung from its request's tokens (``Node.source`` set) goes on a span: one page."""
    return node.end - node.start == page


def add_leaf(spans: EvictedSpans, place: int, start: int, end: int) -> None:
    """A one-page leaf ``[start, end)`` on the tokens of the request at ``place`` evicted: the last span's start
    moved where the span is that request's, starts at ``end`` and is not indexed yet, else a new span."""
    at = spans.spans
    if len(at) > spans.num_indexed and at[-3] == place and at[-2] == end:
        at[-2] = start
    else:
        at.append(place)
        at.append(start)
        at.append(end)


def index_spans(spans: EvictedSpans, request_seq: Callable[[str], Any] | None, sources: list[str]) -> None:
    """The spans made since the last read indexed by their runs' tokens (``by_token``)."""
    if COMPACT:
        index_compact(spans, request_seq, sources)
        return
    at, by_token = spans.spans, spans.by_token
    for index in range(spans.num_indexed, len(at), 3):
        place, start, end = at[index], at[index + 1], at[index + 2]
        tokens = request_seq(sources[place])  # type: ignore[misc]  # spans are made only with a trace
        starts, runs = tokens._run_starts(), tokens.runs
        run = bisect.bisect_right(starts, start) - 1
        while run < len(runs) and starts[run] < end:
            source, offset, count = runs[run]
            low, high = max(start, starts[run]), min(end, starts[run] + count)
            segments = by_token.setdefault((source, offset - starts[run]), [])
            segments.extend((place, low, high, start))
            run += 1
    spans.num_indexed = len(at)


def index_compact(spans: EvictedSpans, request_seq: Callable[[str], Any] | None, sources: list[str]) -> None:
    """``index_spans`` into ``heads`` and ``segments``; the spans indexed dropped (``spans`` emptied)."""
    at, heads, segments = spans.spans, spans.heads, spans.segments
    for index in range(spans.num_indexed, len(at), 3):
        place, start, end = at[index], at[index + 1], at[index + 2]
        tokens = request_seq(sources[place])  # type: ignore[misc]  # spans are made only with a trace
        starts, runs = tokens._run_starts(), tokens.runs
        run = bisect.bisect_right(starts, start) - 1
        while run < len(runs) and starts[run] < end:
            source, offset, count = runs[run]
            key = token_key(source, offset - starts[run])
            low, high = max(start, starts[run]), min(end, starts[run] + count)
            segments.extend((place, low, high, start, heads.get(key, -1)))
            heads[key] = len(segments) - 5
            run += 1
    at.clear()
    spans.num_indexed = 0


def in_spans(
    spans: EvictedSpans,
    tokens,
    depth: int,
    page: int,
    request_seq: Callable[[str], Any] | None,
    sources: list[str],
) -> bool:
    """Whether a span holds a leaf at ``depth`` whose page and prefix hash as ``tokens``' do there (what
    ``misses_evicted.was_evicted`` answers of the entries ``sourced_entry`` would have made)."""
    if spans.num_indexed < len(spans.spans):
        index_spans(spans, request_seq, sources)
    if depth >= tokens.length:
        return False
    starts = tokens._run_starts()
    run = bisect.bisect_right(starts, depth) - 1
    source, offset, _ = tokens.runs[run]
    if COMPACT:
        at = spans.heads.get(token_key(source, offset - starts[run]), -1)
        return at >= 0 and in_segments(spans.segments, at, tokens, depth, page, request_seq, sources)
    segments = spans.by_token.get((source, offset - starts[run]))
    if segments is None:
        return False
    first, wanted = hash(tokens.first_page(page, depth)), None
    for index in range(0, len(segments), 4):
        low, high, start = segments[index + 1], segments[index + 2], segments[index + 3]
        if not (low <= depth < high and (depth - start) % page == 0):
            continue
        theirs = request_seq(sources[segments[index]])  # type: ignore[misc]
        if hash(theirs.first_page(page, depth)) != first:
            continue
        if wanted is None:
            wanted = prefix_hash(tokens.slice(0, depth).runs)
        if prefix_hash(theirs.slice(0, depth).runs) == wanted:
            return True
    return False


def in_segments(
    segments: Any,
    at: int,
    tokens,
    depth: int,
    page: int,
    request_seq: Callable[[str], Any] | None,
    sources: list[str],
) -> bool:
    """``in_spans``' candidates read along one key's segments from the one at ``at`` (``COMPACT``)."""
    first, wanted = hash(tokens.first_page(page, depth)), None
    while at >= 0:
        low, high, start = segments[at + 1], segments[at + 2], segments[at + 3]
        if low <= depth < high and (depth - start) % page == 0:
            theirs = request_seq(sources[segments[at]])  # type: ignore[misc]
            if hash(theirs.first_page(page, depth)) == first:
                if wanted is None:
                    wanted = prefix_hash(tokens.slice(0, depth).runs)
                if prefix_hash(theirs.slice(0, depth).runs) == wanted:
                    return True
        at = segments[at + 4]
    return False
