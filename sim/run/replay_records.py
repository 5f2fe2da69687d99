"""A replay's per-request outcome as machine integers, in replay order: the request table reads four lengths and
a refusal of each request, so a ``RequestState`` (a slots record, a ``MatchResult``, boxed ints, a dict entry by
id: ~0.3 KB a request, held from before the first request to the table) is made only for its row, a chunk of
rows at a time (``sim/run/table_chunks.py``). ``StatesLog`` writes the records of ``states_of`` instead (the
reference, ``simulate.REPLAY_RECORDS`` off; tests/test_replay_records.py holds the two tables equal)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import pandas as pd

from sim.cache.results import MatchResult
from sim.run.replay_columns import columns_table
from sim.run.table_chunks import frame_of_rows
from sim.sched.request import REQUEST_COLUMNS, RequestRow, RequestState
from sim.trace import Trace

_NO_SOUND_LEN = -1  # ``MatchResult.sound_len`` None (a length is never negative)
# True: the request table is made a column at a time from the records (``sim/run/replay_columns.py``); False: a
# ``RequestState`` and a row per request, a chunk of rows at a time (the reference; tests/test_replay_records.py)
TABLE_BY_COLUMN = True


class ReplayRecords:
    """Each request's match lengths and inserted tokens, in the order it ran; a refusal's text by position."""

    def __init__(self) -> None:
        self.cached_len, self.full_depth = array("q"), array("q")
        self.sound_len, self.inserted_len = array("q"), array("q")
        self.refusals: dict[int, str] = {}

    def served(self, request_id: str, match: MatchResult, inserted_len: int) -> None:
        sound_len = match.sound_len
        self.cached_len.append(match.cached_len)
        self.full_depth.append(match.full_depth)
        self.sound_len.append(_NO_SOUND_LEN if sound_len is None else sound_len)
        self.inserted_len.append(inserted_len)

    def refused(self, request_id: str, why: str) -> None:
        self.refusals[len(self.cached_len)] = why
        for column in (self.cached_len, self.full_depth, self.sound_len, self.inserted_len):
            column.append(0)

    def state(self, trace: Trace, request_id: str, at: int) -> RequestState:
        """The record ``StatesLog`` would hold for the request that ran ``at``-th."""
        state = RequestState.from_trace(trace, request_id)
        why = self.refusals.get(at)
        if why is not None:
            state.rejected = why
            return state
        sound_len = self.sound_len[at]
        state.match = MatchResult(
            self.cached_len[at], self.full_depth[at], None, None if sound_len == _NO_SOUND_LEN else sound_len
        )
        state.inserted_len = self.inserted_len[at]
        return state

    def rows(self, trace: Trace, order: list[str]) -> Iterator[RequestRow]:
        """The request table's rows in trace order; ``order``: the ids as they ran."""
        in_trace_order = len(order) == len(trace) and all(
            ran == request.id for ran, request in zip(order, trace, strict=True)
        )
        at = None if in_trace_order else {request_id: index for index, request_id in enumerate(order)}
        for index, request in enumerate(trace):
            yield self.state(trace, request.id, index if at is None else at[request.id]).row()


def request_table(trace: Trace, order: list[str], records: ReplayRecords) -> pd.DataFrame:
    """``metrics.request_table`` of the records ``StatesLog`` would have kept."""
    if TABLE_BY_COLUMN:
        lengths = (records.cached_len, records.full_depth, records.sound_len, records.inserted_len)
        return columns_table(trace, order, lengths, records.refusals)
    return frame_of_rows(lambda: records.rows(trace, order), REQUEST_COLUMNS)


class StatesLog:
    """The reference: each request's outcome written on its ``RequestState`` (``states_of``)."""

    def __init__(self, states: dict[str, RequestState]) -> None:
        self.states = states

    def served(self, request_id: str, match: MatchResult, inserted_len: int) -> None:
        # the row needs the match's lengths only: its node may be evicted later and should then go
        state = self.states[request_id]
        state.match = MatchResult(match.cached_len, match.full_depth, None, match.sound_len)
        state.inserted_len = inserted_len

    def refused(self, request_id: str, why: str) -> None:
        self.states[request_id].rejected = why
