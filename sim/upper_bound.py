"""The upper bound beside a result: the trace's ideal reuse, and where the gap to it goes.

Per request, ``ideal_cached_tokens`` is what an infinite FULL-attention cache at page 1 would reuse
(``sim.trace_stats.ideal_cached_tokens``: the longest prefix of the prompt that an earlier request's
prompt + output starts with, at most ``prompt_len - 1``). The gap to a run's ``cached_tokens`` splits
exactly in two, request by request, ``ideal - cached = (ideal - full_depth) + blocked``:

- not in cache, ``ideal - full_depth``: the FULL KV of that prefix was not in the tree at admission:
  never inserted (a MAMBA model's finish keeps a request only up to its last checkpoint, so the tail of
  a short answer is freed), evicted, its request not finished yet (or never run), or lost to page
  rounding. A request can count negative here when an engine ran a later request of the file first.
- blocked, ``full_depth - cached``: FULL KV was there but a SWA window or a MAMBA checkpoint was not,
  which is the policy's own doing (SGLang's retain floor, FreeToken's finish-time trim).
"""
from __future__ import annotations

import weakref

import pandas as pd

from sim.trace import Trace
from sim.trace_stats import followup_parents, ideal_cached_tokens

_IDEAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Trace -> per-request ideal, computed once


def ideal_by_request(trace: Trace) -> dict[str, int]:
    if trace not in _IDEAL:
        _IDEAL[trace] = dict(zip((r.id for r in trace), ideal_cached_tokens(trace), strict=True))
    return _IDEAL[trace]


def with_ideal(trace: Trace, requests: pd.DataFrame) -> pd.DataFrame:
    """The request table with ``ideal_cached_tokens`` and, where it has ``inserted_tokens`` (what the tree
    kept of each request at its finish), ``previous_inserted_tokens``: what it kept of a follow-up's
    previous turn (a MAMBA model's insert stops at the last checkpoint, so a short answer is never cached)."""
    ideal = ideal_by_request(trace)
    requests = requests.assign(ideal_cached_tokens=[ideal[request_id] for request_id in requests["id"]])
    if "inserted_tokens" not in requests:
        return requests
    inserted = dict(zip(requests["id"], requests["inserted_tokens"], strict=True))
    parents = followup_parents(trace)
    previous = [inserted[parents[i]] if i in parents else None for i in requests["id"]]
    return requests.assign(previous_inserted_tokens=pd.array(previous, dtype="Int64"))


def upper_bound(requests: pd.DataFrame) -> dict:
    """Summary keys over the served requests (a table from ``with_ideal``): the bound and the gap's split."""
    served = requests[requests["rejected"] == ""]
    followups = served[served["followup"]]
    ideal_hits = followups["ideal_cached_tokens"] > followups["previous_prompt_tokens"].astype(float) + 1
    return {
        "ideal_cached_tokens": int(served["ideal_cached_tokens"].sum()),
        "ideal_decode_region_hits": int(ideal_hits.sum()),
        "gap_not_in_cache_tokens": int((served["ideal_cached_tokens"] - served["full_depth"]).sum()),
        "gap_blocked_tokens": int(served["blocked"].sum()),
    }
