"""Replay mode: requests one after another in arrival order, each prefilled and decoded alone.

No time and no batching: exactly the policy's cache decisions, for quick sweeps over huge traces (the
kind of replay Marconi's and KVCache.AI's simulators do). Each prefill chunk and decode step counts as
one engine iteration, which is what the ``iterations`` SWA trigger sees.
"""
from __future__ import annotations

from typing import NamedTuple

from sim.cache.manager import CacheManager
from sim.cache.results import MatchResult, Refusal
from sim.tokens import TokenSeq


class ReplayRefused(RuntimeError):
    pass


class SoloRun(NamedTuple):
    match: MatchResult
    end_iteration: int
    inserted_len: int
    peak_usage: dict  # pool usage just before the finish: the request still holds all it allocated


def run_alone(manager: CacheManager, request_id: str, tokens: TokenSeq, prompt_len: int, output_len: int,
              chunk_size: int, iteration: int = 0) -> SoloRun:
    """Admit, prefill in chunks, decode ``output_len - 1`` tokens (the last sampled token is never
    computed), finish. ``tokens`` holds the prompt followed by the output."""
    admitted = _ok(manager.admit(request_id, tokens, prompt_len), request_id)
    position = admitted.match.cached_len
    while position < prompt_len:
        chunk = manager.next_chunk_len(request_id, chunk_size)
        if chunk <= 0:
            raise ReplayRefused(f"request {request_id}: no prefill chunk fits at position {position}")
        _ok(manager.prepare_prefill(request_id, chunk, iteration), request_id)
        manager.complete_prefill(request_id, chunk)
        position, iteration = position + chunk, iteration + 1
    done = manager.advance_decode(request_id, output_len - 1, iteration)
    if done < output_len - 1:
        _ok(manager.prepare_decode(request_id, iteration + done), request_id)
    iteration += done
    peak_usage = manager.usage()
    finished = manager.finish(request_id)
    return SoloRun(admitted.match, iteration, finished.inserted_len, peak_usage)


def _ok(result, request_id: str):
    if isinstance(result, Refusal):
        raise ReplayRefused(f"request {request_id}: the pools cannot hold it even after eviction ({result})")
    return result


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


def replay_trace(trace, manager: CacheManager, chunk_size: int, fits=None):
    """Run every request alone, in ``replay_order``. Yields (request id, SoloRun or refusal text, usage
    at the request's peak). ``fits(request_id)`` names why a request can never run, or returns None."""
    iteration = 0
    for request_id in replay_order(trace):
        why_not = fits(request_id) if fits is not None else None
        if why_not is not None:
            yield request_id, why_not, manager.usage()
            continue
        tokens = trace.request_seq(request_id)
        try:
            run = run_alone(manager, request_id, tokens, trace.prompt_len(request_id),
                            trace.request(request_id).output_len, chunk_size, iteration)
        except ReplayRefused as refused:
            if request_id in manager.requests:
                manager.abort(request_id)
            yield request_id, str(refused), manager.usage()
            continue
        iteration = run.end_iteration
        yield request_id, run, run.peak_usage
