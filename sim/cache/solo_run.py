"""One request run alone on a cache: admitted, prefilled in chunks, decoded, finished, with no other request
in between. Replay mode runs a whole trace so (``sim/run/replay.py``), and Marconi's alpha tuner replays its window
so (``engines/marconi_tuner.py``); it lives in the cache layer because the tuner, a cache rule, needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from sim.cache.errors import ReplayRefused
from sim.cache.results import MatchResult, Refusal
from sim.cache.tuple_new import new_tuple
from sim.tokens import TokenSeq

if TYPE_CHECKING:
    from sim.cache.interface import CacheModel


class SoloRun(NamedTuple):
    match: MatchResult
    end_iteration: int
    inserted_len: int
    peak_usage: dict  # pool usage just before the finish: the request still holds all it allocated


def new_solo_run(match: MatchResult, end_iteration: int, inserted_len: int, peak_usage: dict) -> SoloRun:
    """``SoloRun(...)``, built natively when compiled (``sim/cache/tuple_new.py``)."""
    return new_tuple(SoloRun, (match, end_iteration, inserted_len, peak_usage))


def run_alone(
    manager: CacheModel,
    request_id: str,
    tokens: TokenSeq,
    prompt_len: int,
    output_len: int,
    chunk_size: int,
    iteration: int = 0,
) -> SoloRun:
    """Admit, prefill in chunks, decode ``output_len - 1`` tokens (the last sampled token is never
    computed), finish. ``tokens`` holds the prompt followed by the output."""
    manager.begin_pass()
    admitted = accepted(manager.admit(request_id, tokens, prompt_len), request_id)
    position = admitted.match.cached_len
    while position < prompt_len:
        if position > admitted.match.cached_len:  # each later chunk is a pass of its own
            manager.settle(request_id, 0)  # an overlap loop commits the chunk before it schedules the next
            manager.begin_pass()
        # each a chunk as below
        taken = accepted(manager.take_page_chunks(request_id, chunk_size), request_id)
        if taken:
            position, iteration = position + taken * manager.page_size, iteration + taken
            continue
        chunk = manager.next_chunk_len(request_id, chunk_size)
        if chunk <= 0:
            raise ReplayRefused(f"request {request_id}: no prefill chunk fits at position {position}")
        accepted(manager.prepare_prefill(request_id, chunk, iteration), request_id)
        manager.complete_prefill(request_id, chunk)
        position, iteration = position + chunk, iteration + 1
    done = manager.advance_decode(request_id, output_len - 1, iteration)
    if done < output_len - 1:
        accepted(manager.prepare_decode(request_id, iteration + done), request_id)
    iteration += done
    peak_usage = manager.usage()
    finished = manager.finish(request_id)
    return new_solo_run(admitted.match, iteration, finished.inserted_len, peak_usage)


def accepted(result, request_id: str):
    """``result``, or ``ReplayRefused`` where it is a ``Refusal`` (``run_alone``'s and the tuner's fused run's)."""
    if isinstance(result, Refusal):
        raise ReplayRefused(f"request {request_id}: the pools cannot hold it even after eviction ({result})")
    return result
