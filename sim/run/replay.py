"""Replay mode: requests one after another in arrival order, each prefilled and decoded alone.

No time and no batching: exactly the policy's cache decisions, for quick sweeps over huge traces (the
kind of replay Marconi's and KVCache.AI's simulators do). Each prefill chunk and decode step counts as
one engine iteration, which is what the ``iterations`` SWA trigger sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.errors import ReplayRefused
from sim.cache.interface import CacheModel
from sim.cache.results import MatchResult
from sim.cache.solo_run import run_alone
from sim.tokens import TokenSeq

# True: a replay whose bounds are asked keeps each request's sequence it made (``Trace.request_seq``, ~27 segment
# runs a Mooncake request) and hands it to the bounds' trie, which made each again (~0.03 of the ~0.15 s the bounds
# add to `no-cache`'s replay at 4,000); False: the trie makes them (the reference; tests/test_replay_seqs_kept.py)
SEQS_KEPT = True


class RowLog(Protocol):
    """``step_log.ReplaySteps`` (not imported: that module needs pandas, which the compiled core's build cannot
    type-check)."""

    def append(self, request_id: str, pools: tuple[int, ...]) -> None: ...


class Outcomes(Protocol):
    """``replay_records.ReplayRecords`` (machine integers) or ``StatesLog`` (the reference: ``RequestState``s)."""

    def served(self, request_id: str, match: MatchResult, inserted_len: int) -> None: ...

    def refused(self, request_id: str, why: str) -> None: ...


def replay_order(trace) -> list[str]:
    """Open-loop requests by arrival; a closed-loop request right after the request it follows."""
    followers = trace.followers()
    order: list[str] = []
    stack = [r.id for r in trace.open_loop()][::-1]  # popped from the end: the first arrival first
    while stack:
        request_id = stack.pop()
        order.append(request_id)
        stack.extend(reversed(followers.get(request_id, [])))
    return order


def replay_trace(
    trace, manager: CacheModel, chunk_size: int, fits=None, seqs: dict[str, TokenSeq] | None = None
):
    """Run every request alone, in ``replay_order``. Yields (request id, SoloRun or refusal text, usage
    at the request's peak). ``fits(request_id)`` names why a request can never run, or returns None; ``seqs``
    (where given) gets the sequence of each request that does."""
    iteration = 0
    for request_id in replay_order(trace):
        why_not = fits(request_id) if fits is not None else None
        if why_not is not None:
            yield request_id, why_not, manager.usage()
            continue
        tokens = trace.request_seq(request_id)
        if seqs is not None:
            seqs[request_id] = tokens
        try:
            run = run_alone(
                manager,
                request_id,
                tokens,
                trace.prompt_len(request_id),
                trace.request(request_id).output_len,
                chunk_size,
                iteration,
            )
        except ReplayRefused as refused:
            if request_id in manager.requests:
                manager.abort(request_id)
            yield request_id, str(refused), manager.usage()
            continue
        iteration = run.end_iteration
        yield request_id, run, run.peak_usage


def replay_into(
    trace,
    manager: CacheModel,
    chunk_size: int,
    fits: Callable[[str], str | None],
    outcomes: Outcomes,
    steps: RowLog,
    on_step: Callable[[int], object] | None = None,
    keep_seqs: bool = False,
) -> dict[str, TokenSeq] | None:
    """``replay_trace`` with each request's outcome and step row written as it ends: the run's per-request loop,
    here so that the compiled core runs it natively (in ``simulate.py`` it stayed interpreted). ``keep_seqs``
    (the bounds asked) and ``SEQS_KEPT``: the sequences of the requests it ran, by id, else None."""
    seqs: dict[str, TokenSeq] | None = {} if keep_seqs and SEQS_KEPT else None
    for index, (request_id, run, usage) in enumerate(replay_trace(trace, manager, chunk_size, fits, seqs)):
        if isinstance(run, str):
            outcomes.refused(request_id, run)
        else:
            outcomes.served(request_id, run.match, run.inserted_len)
        steps.append(request_id, usage[FULL] + usage[SWA] + usage[MAMBA])  # ``metrics.pool_values``
        if on_step is not None:
            on_step(index + 1)
    return seqs
