"""One request's record from its trace line to its metrics row (nano-vllm's ``Sequence``).

``RequestState`` is made from the trace before the run starts, carried through the queue, the running set
and the cache manager's answers, and stamped with its times by the engine; ``row()`` turns it into the
typed ``RequestRow`` of the request table. Nothing about a request lives in a side table keyed by its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sim.cache.results import MatchResult
from sim.tokens import TokenSeq
from sim.trace import Trace
from sim.trace.stats import followup_parent


class RequestRow(NamedTuple):
    """A row of the request table (``requests.csv``), in column order."""

    id: str
    session: str | None
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    full_depth: int
    blocked: int
    recomputed_tokens: int
    reuse_fraction: float
    followup: bool
    previous_prompt_tokens: int | None
    decode_region_hit: bool | None
    arrival_at: float | None
    first_token_at: float | None
    finished_at: float | None
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    retractions: int
    rejected: str  # why the request never ran; "" when it was served
    relies_on_freed_window: bool
    inserted_tokens: int  # tokens of its sequence the cache kept at its finish


REQUEST_COLUMNS = list(RequestRow._fields)


def served_mask(table: Any) -> Any:
    """Which rows of a request table (a DataFrame) were served: a request never run has its refusal in
    ``rejected``, a served one the empty string."""
    return table["rejected"] == ""


def served(table: Any) -> Any:
    """The served rows of a request table."""
    return table[served_mask(table)]


@dataclass(eq=False, slots=True)  # one per request of the trace: a million at the fan-out's scale
class RequestState:
    request_id: str
    session: str | None
    prompt_len: int
    output_len: int
    previous_prompt_len: int | None  # the prompt a follow-up turn extends (None: not a follow-up)
    tokens: TokenSeq | None = None  # prompt + output, set when the request is submitted
    arrived_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    match: MatchResult | None = None  # the match it last ran with
    copy_state_from: int | None = None  # its first chunk resumes from this tree state
    decoded: int = 0  # output tokens whose KV is computed (the first output token needs none)
    num_retractions: int = 0
    admission_order: int = -1  # the newest running request is retracted first
    alone_reached: int = -1  # how far it got when last retracted while running alone
    last_refusal: str = ""  # why the pools last refused its step
    inserted_len: int = 0
    rejected: str = ""

    @classmethod
    def from_trace(cls, trace: Trace, request_id: str) -> RequestState:
        request = trace.request(request_id)
        return cls(
            request_id,
            request.session,
            trace.prompt_len(request_id),
            request.output_len,
            _previous_prompt_len(trace, request_id),
        )

    def row(self) -> RequestRow:
        match, prompt_len, previous = self.match, self.prompt_len, self.previous_prompt_len
        cached = match.cached_len if match is not None else 0
        first, finished, arrived = self.first_token_at, self.finished_at, self.arrived_at
        tpot = None
        if self.output_len > 1 and first is not None and finished is not None:
            tpot = (finished - first) / (self.output_len - 1)
        return RequestRow(
            self.request_id,
            self.session,
            prompt_len,
            self.output_len,
            cached,
            match.full_depth if match is not None else 0,
            match.blocked if match is not None else 0,
            prompt_len - cached,
            cached / prompt_len,
            previous is not None,
            previous,
            None if previous is None else cached > previous + 1,
            arrived,
            first,
            finished,
            _diff(first, arrived),
            tpot,
            _diff(finished, arrived),
            self.num_retractions,
            self.rejected,
            bool(match is not None and match.relies_on_freed_window),
            self.inserted_len,
        )


def states_of(trace: Trace) -> dict[str, RequestState]:
    """Every request's record, by id, in trace order (the request table's order)."""
    return {request.id: RequestState.from_trace(trace, request.id) for request in trace}


def _previous_prompt_len(trace: Trace, request_id: str) -> int | None:
    parent = followup_parent(trace.request(request_id))
    return None if parent is None else trace.prompt_len(parent)


def _diff(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else later - earlier
