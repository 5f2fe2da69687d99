"""One request of Marconi's tuner window run alone, fused (``solo_hit``): what ``solo_run.run_alone`` does on the
tuner's anonymous cache, in one function that answers only what the tuner reads, the request's hit.

``run_alone`` serves replay mode too and answers a ``SoloRun``: the hit, the last iteration, the inserted
length and the pools' peak usage. The tuner reads the hit alone (``AlphaTuner.run``), so here no usage is
summed, no result tuple is built, no lifecycle call goes through the manager's generic checks where the rules
answer it directly (a cache with a finish listener, or rules that take page chunks (``marconi-vllm``), go
through ``run_alone``): a chunk's budget is the rules' ``budgeted_chunk`` and ``chunk_len`` (the pass is open: it
began just before), its plan the rules' ``before_prefill_chunk``, ``evict_ahead`` and ``_plan`` (a chunk the
budget sized never passes the prompt, and rules that take no page chunks plan none), and the finish is
Marconi's last insert and the release, with no event, no ``FinishResult`` and no relock of the new path (the
release would unlock it at once: ``_finish``). tests/test_marconi_solo_property.py holds the tuner's figures,
the chosen alpha and whole runs equal either way.
"""

from __future__ import annotations

from typing import Protocol, cast

from sim.cache import decode_runs, locks
from sim.cache.engines.marconi_recency import Recency
from sim.cache.errors import ReplayRefused
from sim.cache.insert import insert
from sim.cache.manager import CacheManager
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.solo_run import accepted, run_alone
from sim.tokens import TokenSeq

# True: the tuner's solo runs go through ``solo_hit``; False: through ``run_alone``, the reference
FUSED_SOLO = True


class MarconiFinish(Protocol):
    """What of ``MarconiRules`` the fused finish reads (``marconi.py`` imports the tuner, which imports this)."""

    recency: Recency
    insert_touches_path: bool

    def insert_len(self, req: RequestCache) -> int | None: ...

    def stamp_inserted(self, node: Node) -> None: ...


def solo_hit(
    manager: CacheManager, request_id: str, tokens: TokenSeq, prompt_len: int, chunk_size: int
) -> int:
    """``run_alone(...).match.cached_len`` (the output is the rest of ``tokens``), raising ``ReplayRefused``
    where it raises, with the cache left as it leaves it."""
    rules = manager.rules
    if not FUSED_SOLO or rules.takes_page_chunks(manager) or _heard(manager):
        output_len = len(tokens) - prompt_len
        return run_alone(manager, request_id, tokens, prompt_len, output_len, chunk_size).match.cached_len
    manager.begin_pass()
    admitted = accepted(manager.admit(request_id, tokens, prompt_len), request_id)
    req = manager.requests[request_id]
    hit = admitted.match.cached_len
    iteration = _prefill(manager, req, chunk_size, hit)
    num_steps = len(tokens) - prompt_len - 1
    done = decode_runs.advance_decode(manager, request_id, num_steps, iteration)
    if done < num_steps:
        accepted(manager.prepare_decode(request_id, iteration + done), request_id)
    _finish(manager, req)
    del manager.requests[request_id]
    rules.after_release(manager, req)
    return hit


def _finish(manager: CacheManager, req) -> None:
    """Marconi's finish (its last insert) and the release, without the insert's relock: the release would
    unlock at once what the relock locked, so the request's locks from before the insert are unlocked instead
    (the same counts and holders at the end: the relock's slide or rebuild only moves them down the new path;
    Marconi's trees make no run nodes, whose window lock could cut one, and its eviction strategy hears no
    release)."""
    rules = cast(MarconiFinish, manager.rules)
    end = rules.insert_len(req)
    if end is not None and end > req.prefix_len:
        rules.recency.tick(2)  # as ``MarconiRules.insert``
        touch = rules.insert_touches_path
        rules.stamp_inserted(
            insert(manager.tree, req, end, manager.window, manager.has_swa, touch_path=touch)
        )
    for comp, ids in req.drop_all().items():
        manager.pools[comp].free(ids)
    locks.unlock(manager.tree, req.locks)


def _prefill(manager: CacheManager, req, chunk_size: int, hit: int) -> int:
    """The prompt's chunks from the hit on, each its own pass, as ``run_alone`` takes them on rules that take
    no page chunks; returns the iteration after the last."""
    rules, prompt_len, iteration = manager.rules, req.prompt_len, 0
    while req.kv_len < prompt_len:
        if req.kv_len > hit:  # each later chunk is a pass of its own, its commit settled first
            manager.settle(req.request_id, 0)
            manager.begin_pass()
        chunk = rules.budgeted_chunk(req, chunk_size)
        if chunk > 0:
            chunk = rules.chunk_len(manager, req, chunk)
        if chunk <= 0:
            raise ReplayRefused(f"request {req.request_id}: no prefill chunk fits at position {req.kv_len}")
        rules.before_prefill_chunk(manager, req)
        rules.evict_ahead(manager, req.pages_needed(req.kv_len + chunk))
        accepted(manager._plan(req, chunk, rules.prefill_checkpoint(req, chunk)), req.request_id)
        manager.complete_prefill(req.request_id, chunk)
        iteration += 1
    return iteration


def _heard(manager: CacheManager) -> bool:
    """Whether a listener hears the cache's inserts or finishes (the fused run emits no event)."""
    return bool(manager._inserted or manager._finishing or manager._finished)
