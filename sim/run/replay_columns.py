"""A replay's request table made a column at a time from its records (``ReplayRecords``' integer columns and the
trace), not a ``RequestState`` and a row tuple per request: the lengths are whole machine-integer arrays and the
figures the rows compute from them (``blocked``, ``recomputed_tokens``, ``reuse_fraction``, ...) one array
operation each. The columns a row leaves to pandas' inference (ints or None, bools or None, strings) are lists,
which pandas infers as it infers a column of rows; a replay sets none of the clocks. The table equals the rows'
(``replay_records.TABLE_BY_COLUMN`` off: tests/test_replay_records.py)."""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from sim.sched.request import REQUEST_COLUMNS
from sim.trace import Trace
from sim.trace.stats import followup_parent

# a replay sets none of a request's clocks
_CLOCKS = ("arrival_at", "first_token_at", "finished_at", "ttft_s", "tpot_s", "e2e_s")


def columns_table(
    trace: Trace, order: list[str], lengths: tuple[array, array, array, array], refusals: dict[int, str]
) -> pd.DataFrame:
    """``replay_records.request_table``'s table; ``order``: the ids as they ran; ``lengths``: the records'
    cached, full-depth, sound (-1: none) and inserted lengths; ``refusals``: why, by run position."""
    requests = trace.requests
    at = _run_positions(trace, order)
    cached, full_depth, sound_len, inserted = (_in_trace_order(column, at) for column in lengths)
    prompt = np.array([trace.prompt_len(request.id) for request in requests], dtype=np.int64)
    previous = [_previous_prompt_len(trace, request) for request in requests]
    followup = np.array([p is not None for p in previous], dtype=bool)
    previous_or_0 = np.array([0 if p is None else p for p in previous], dtype=np.int64)
    hits = (cached > previous_or_0 + 1).tolist()  # Python's bools, as a row's ``cached > previous + 1``
    data: dict[str, object] = {
        "id": [request.id for request in requests],
        "session": [request.session for request in requests],
        "prompt_tokens": prompt,
        "output_tokens": np.array([request.output_len for request in requests], dtype=np.int64),
        "cached_tokens": cached,
        "full_depth": full_depth,
        "blocked": full_depth - cached,
        "recomputed_tokens": prompt - cached,
        "reuse_fraction": cached / prompt,  # IEEE division of exact doubles: Python's ``int / int``
        "followup": followup,
        "previous_prompt_tokens": previous,
        "decode_region_hit": [None if p is None else hit for p, hit in zip(previous, hits, strict=True)],
        **dict.fromkeys(_CLOCKS, [None] * len(requests)),  # one list: pandas makes each column its own
        "retractions": np.zeros(len(requests), dtype=np.int64),
        "rejected": _rejected(refusals, at, len(requests)),
        "relies_on_freed_window": (sound_len >= 0) & (sound_len < cached),  # -1: no sound length
        "inserted_tokens": inserted,
    }
    return pd.DataFrame({name: data[name] for name in REQUEST_COLUMNS}, copy=False)


def _run_positions(trace: Trace, order: list[str]) -> np.ndarray | None:
    """Where each request of the trace ran (None: in trace order)."""
    if len(order) == len(trace) and all(ran == request.id for ran, request in zip(order, trace, strict=True)):
        return None
    ran_at = {request_id: index for index, request_id in enumerate(order)}
    return np.array([ran_at[request.id] for request in trace], dtype=np.int64)


def _in_trace_order(column: array, at: np.ndarray | None) -> np.ndarray:
    values = np.array(column, dtype=np.int64)  # a copy: the records' arrays go when the table is made
    return values if at is None else values[at]


def _rejected(refusals: dict[int, str], at: np.ndarray | None, num_requests: int) -> list[str]:
    rejected = [""] * num_requests
    if refusals:
        positions = range(num_requests) if at is None else at.tolist()
        for index, ran in enumerate(positions):
            rejected[index] = refusals.get(ran, "")
    return rejected


def _previous_prompt_len(trace: Trace, request) -> int | None:
    parent = followup_parent(request)
    return None if parent is None else trace.prompt_len(parent)
