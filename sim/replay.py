"""Replay mode: requests one after another in arrival order, each prefilled and decoded alone.

No time and no batching: exactly the policy's cache decisions, for quick sweeps over huge traces (the
kind of replay Marconi's and KVCache.AI's simulators do). Each prefill chunk and decode step counts as
one engine iteration, which is what the ``iterations`` SWA trigger sees.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.cache.manager import CacheManager
from sim.cache.results import MatchResult, Refusal
from sim.tokens import TokenSeq


class ReplayRefused(RuntimeError):
    pass


@dataclass(frozen=True)
class SoloRun:
    match: MatchResult
    end_iteration: int
    inserted_len: int


def run_alone(manager: CacheManager, request_id: str, tokens: TokenSeq, prompt_len: int, output_len: int,
              chunk_size: int, iteration: int = 0) -> SoloRun:
    """Admit, prefill in chunks, decode ``output_len - 1`` tokens (the last sampled token is never
    computed), finish. ``tokens`` holds the prompt followed by the output."""
    admitted = _ok(manager.admit(request_id, tokens, prompt_len), request_id)
    position = admitted.match.cached_len
    while position < prompt_len:
        chunk = min(chunk_size, prompt_len - position)
        _ok(manager.prepare_prefill(request_id, chunk, iteration), request_id)
        manager.complete_prefill(request_id, chunk)
        position, iteration = position + chunk, iteration + 1
    for _ in range(output_len - 1):
        _ok(manager.prepare_decode(request_id, iteration), request_id)
        manager.complete_decode(request_id)
        iteration += 1
    finished = manager.finish(request_id)
    return SoloRun(admitted.match, iteration, finished.inserted_len)


def _ok(result, request_id: str):
    if isinstance(result, Refusal):
        manager_msg = f"request {request_id}: the pools cannot hold it even after eviction ({result})"
        raise ReplayRefused(manager_msg)
    return result
