"""The upper bound beside a result: the trace's ideal reuse, and where the gap to it goes.

Per request, ``ideal_cached_tokens`` is what an infinite FULL-attention cache at page 1 would reuse
(``sim.trace.stats.ideal_cached_tokens``: the longest prefix of the prompt that an earlier request's
prompt + output starts with, at most ``prompt_len - 1``). The gap to a run's ``cached_tokens`` splits
exactly in three, request by request (``ideal - cached = (ideal - full_depth) + blocked``, the first term
split in two):

- never kept: tokens past what the follow-up's previous turn left in the tree at its finish
  (``previous_inserted_tokens``; a MAMBA model's finish keeps a request only up to its last checkpoint,
  so the tail of a short answer is freed) that no other request put there either;
- evicted (or not finished): the rest of ``ideal - full_depth``: FULL KV that was in the tree and was
  evicted, or whose request had not finished yet (or never ran), or page rounding. A request can count
  negative here when an engine ran a later request of the file first;
- blocked, ``full_depth - cached``: FULL KV was there but a SWA window or a MAMBA checkpoint was not,
  which is the policy's own doing (SGLang's retain floor, FreeToken's finish-time trim).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.sched.request import served as served_rows
from sim.trace import Trace
from sim.trace.stats import followup_parents, ideal_cached_tokens

_IDEAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Trace -> per-request ideal, computed once


def ideal_in_trace_order(trace: Trace) -> np.ndarray:
    """Every request's ideal reuse, in the trace's order (machine ints: a million requests' worth is 8 MB)."""
    if trace not in _IDEAL:
        _IDEAL[trace] = np.array(ideal_cached_tokens(trace), dtype=np.int64)
    return _IDEAL[trace]


def with_ideal(trace: Trace, requests: pd.DataFrame) -> pd.DataFrame:
    """The request table with ``ideal_cached_tokens`` and, where it has ``inserted_tokens`` (what the tree
    kept of each request at its finish), ``previous_inserted_tokens``: what it kept of a follow-up's
    previous turn (a MAMBA model's insert stops at the last checkpoint, so a short answer is never cached)."""
    ideal = ideal_in_trace_order(trace)
    ids = requests["id"].tolist()  # read three times below: a list, not the column's strings one by one
    column: np.ndarray | list
    if not len(ids):
        column = []
    elif len(ids) == len(trace) and all(a == r.id for a, r in zip(ids, trace, strict=True)):
        column = ideal.copy()
    else:
        by_id = dict(zip((r.id for r in trace), ideal.tolist(), strict=True))
        column = np.array([by_id[request_id] for request_id in ids], dtype=np.int64)
    requests = requests.assign(ideal_cached_tokens=column)
    if "inserted_tokens" not in requests:
        return requests
    parents = followup_parents(trace)
    quoted = set(parents.values())  # only what a follow-up's parent kept is asked: no map of every request
    inserted = {i: kept for i, kept in zip(ids, requests["inserted_tokens"], strict=True) if i in quoted}
    previous = [inserted[parents[i]] if i in parents else None for i in ids]
    return requests.assign(previous_inserted_tokens=pd.array(previous, dtype="Int64"))


@dataclass(frozen=True, kw_only=True)
class GapFigures:
    """The summary's gap section: the ideal beside the run, and where the gap to it goes."""

    ideal_cached_tokens: int
    ideal_decode_region_hits: int
    gap_evicted_tokens: int
    gap_never_kept_tokens: int
    gap_blocked_tokens: int


def upper_bound(requests: pd.DataFrame) -> GapFigures:
    """Over the served requests (a table from ``with_ideal``): the bound and the gap's split."""
    served = served_rows(requests)
    followups = served[served["followup"]]
    ideal_hits = followups["ideal_cached_tokens"] > followups["previous_prompt_tokens"].astype(float) + 1
    not_in_cache = served["ideal_cached_tokens"] - served["full_depth"]
    never_kept = never_kept_tokens(served)
    return GapFigures(
        ideal_cached_tokens=int(served["ideal_cached_tokens"].sum()),
        ideal_decode_region_hits=int(ideal_hits.sum()),
        gap_evicted_tokens=int(not_in_cache.sum() - never_kept.sum()),
        gap_never_kept_tokens=int(never_kept.sum()),
        gap_blocked_tokens=int(served["blocked"].sum()),
    )


def never_kept_tokens(served: pd.DataFrame) -> pd.Series:
    """Per request: ideal tokens past both the tree's FULL match and what the previous turn kept."""
    if "previous_inserted_tokens" not in served:
        return pd.Series(0, index=served.index)
    kept = served["previous_inserted_tokens"].astype("float").fillna(float("inf"))
    reach = kept.where(kept > served["full_depth"], served["full_depth"])
    return (served["ideal_cached_tokens"] - reach).clip(lower=0).astype(int)
