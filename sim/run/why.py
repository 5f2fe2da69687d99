"""Why each recomputed token was recomputed: the per-request ``why`` column and its totals.

A request's prompt ``[0, P)`` splits, by position, into reused ``[0, cached)`` and recomputed ranges, each
with one reason (``REASONS``)::

    [cached, full_depth)          blocked: FULL KV was there, the match could not end there
        mamba_state               no MAMBA state at any match point past ``cached`` (never checkpointed)
        mamba_evicted             the deepest such state was there and was evicted (MAMBA pool)
        swa_trigger               the SWA window below the deepest stateful point was freed out of the window
                                  while its request ran (SGLang's decode trigger / prefill free, FreeToken's)
        swa_finish_trim           ... freed by a finish-time trim (FreeToken before #200)
        swa_eviction              ... evicted for SWA pool space (vLLM: a block of the window before the
                                  deepest stateful point, evicted from the one block pool)
        retention                 vLLM: the state (or window block) was computed and held, and the retention
                                  interval left it unhashed (docs/vllm-rules.md section 5)
        blocked_other             a blocked range no watcher explains (an engine without one); 0 for every
                                  built-in engine
    [full_depth, floor(ideal))    FULL KV missing although an earlier request computed these tokens
        never_kept                past what the follow-up's previous turn left in the tree at its finish
        full_evicted              the next page (after the same tokens) was in the tree and was evicted
        not_cached                it never was: the earlier request still running, refused, or cut short
                                  (or it was evicted from the middle of a node: only node starts are kept)
    [floor(ideal), ideal)         page_rounding: the tree matches whole pages only
    [ideal, P)                    new: no earlier request holds them (and the last prompt token, always run)

``ideal`` is the trace's upper bound (``sim/bounds/upper_bound.py``); ``never_kept`` is its split, less the page
rounding carved out here. The blocked reasons come from watching the cache manager
(``MissTracker``): which tombstones were made by an eviction or a finish-time trim (every other tombstone
is the request's own out-of-window free), whose MAMBA state was evicted, which FULL pages were evicted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from sim.align import floor_to
from sim.cache.misses import MatchMiss, MissWatcher
from sim.cache.reasons import (
    BLOCKED_OTHER,
    FULL_EVICTED,
    NEVER_KEPT,
    NEW,
    NOT_CACHED,
    PAGE_ROUNDING,
    REASONS,
    Range,
)
from sim.sched.request import served as served_rows

# True: ``why_column`` reads the columns it needs, each made a list once; False: ``itertuples`` over every column,
# the reference (tests/test_why_rows_property.py holds the two equal)
ROWS_BY_COLUMN = True


@dataclass
class KeptMisses:
    """A finished run's why watcher as ``why_column`` reads it: its misses alone (``simulate.WATCHER_MISSES_ONLY``:
    its tables of evicted prefixes and tombstones go when the run is over)."""

    misses: dict[str, MatchMiss]


def request_ranges(row, miss: MatchMiss | None, page_size: int) -> list[Range]:
    """Every recomputed range of one served request (a row of the request table), in position order."""
    cached, full_depth, prompt = int(row.cached_tokens), int(row.full_depth), int(row.prompt_tokens)
    ideal = int(row.ideal_cached_tokens)
    ranges = (
        list(miss.blocked)
        if miss is not None
        else ([(cached, full_depth, BLOCKED_OTHER)] if full_depth > cached else [])
    )
    missing_end = max(full_depth, floor_to(ideal, page_size))
    if missing_end > full_depth:
        kept = getattr(row, "previous_inserted_tokens", None)
        kept = None if kept is None or pd.isna(kept) else int(kept)
        lo = missing_end if kept is None else min(max(full_depth, kept), missing_end)
        absent = FULL_EVICTED if miss is not None and miss.next_page_evicted else NOT_CACHED
        ranges += [(full_depth, lo, absent), (lo, missing_end, NEVER_KEPT)]
    ranges += [(missing_end, max(missing_end, ideal), PAGE_ROUNDING), (max(missing_end, ideal), prompt, NEW)]
    return [r for r in ranges if r[1] > r[0]]


def format_ranges(ranges: list[Range]) -> str:
    return "; ".join(f"{reason} [{start},{end})" for start, end, reason in ranges)


def parse_ranges(text: str) -> list[Range]:
    """``format_ranges``'s text back to ranges (a stored request table's ``why`` column)."""
    ranges = []
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        reason, span = part.split(" ", 1)
        start, end = span.strip("[)").split(",")
        ranges.append((int(start), int(end), reason))
    return ranges


def why_column(requests: pd.DataFrame, watcher: MissWatcher | None, page_size: int) -> tuple[list[str], dict]:
    """Every request's ``why`` text (empty for a request that never ran) and the recomputed tokens per reason,
    in one pass: a million requests' ranges are never all held at once. Without a watcher (a cache that has
    none) blocked ranges are ``blocked_other``."""
    misses = watcher.misses if watcher is not None else {}
    totals, column = dict.fromkeys(REASONS, 0), []
    rows = _why_rows(requests) if ROWS_BY_COLUMN else requests.itertuples(index=False)
    for row in rows:
        if row.rejected != "":
            column.append("")
            continue
        ranges = request_ranges(row, misses.get(row.id), page_size)
        for start, end, reason in ranges:
            totals[reason] += end - start
        column.append(format_ranges(ranges))
    return column, totals


class _WhyRow(NamedTuple):
    """The fields of a request table's row that ``request_ranges`` reads."""

    id: str
    rejected: str
    cached_tokens: int
    full_depth: int
    prompt_tokens: int
    ideal_cached_tokens: int
    previous_inserted_tokens: int | None


def _why_rows(requests: pd.DataFrame) -> Iterator[_WhyRow]:
    """``itertuples`` of the columns ``request_ranges`` reads, each made a list once: a row of every column
    iterates each of them (the ids, the refusals and the why texts are Arrow strings) a value at a time."""
    num_rows = len(requests)
    kept = requests["previous_inserted_tokens"] if "previous_inserted_tokens" in requests else None
    columns = [requests[name].tolist() for name in _WhyRow._fields[:-1]]
    columns.append(kept.tolist() if kept is not None else [None] * num_rows)
    return map(_WhyRow._make, zip(*columns, strict=True))


@dataclass(frozen=True, kw_only=True)
class WhyFigures:
    """The summary's why section: recomputed tokens by reason; they add up to ``recomputed_tokens``."""

    why_mamba_state_tokens: int
    why_mamba_evicted_tokens: int
    why_swa_trigger_tokens: int
    why_swa_finish_trim_tokens: int
    why_swa_eviction_tokens: int
    why_retention_tokens: int
    why_blocked_other_tokens: int
    why_never_kept_tokens: int
    why_full_evicted_tokens: int
    why_not_cached_tokens: int
    why_page_rounding_tokens: int
    why_new_tokens: int

    @classmethod
    def of(cls, totals: dict[str, int]) -> WhyFigures:
        return cls(**{why_key(reason): count for reason, count in totals.items()})


def why_key(reason: str) -> str:
    """The summary's figure for a reason (``why_swa_trigger_tokens``)."""
    return f"why_{reason}_tokens"


def why_summary(totals: dict[str, int]) -> WhyFigures:
    """Recomputed tokens per reason, as ``why_column`` counted them."""
    return WhyFigures.of(totals)


def why_tokens(requests: pd.DataFrame) -> dict[str, int]:
    """Recomputed tokens per reason over the served requests of a stored table's ``why`` column."""
    totals = dict.fromkeys(REASONS, 0)
    served = served_rows(requests) if "rejected" in requests else requests
    for text in served["why"].fillna(""):
        for start, end, reason in parse_ranges(text):
            totals[reason] = totals.get(reason, 0) + end - start
    return totals
