"""Typed results the cache manager hands to the scheduler (and, through it, to a backend).

The immutable ones are named tuples: a timed run makes about a million ``ChunkPlan``s, and a named tuple
is built in half the time of a frozen dataclass. The hot paths build them with the ``new_*`` makers below (the
compiled core natively: ``sim/cache/tuple_new.py``); ``MatchResult(...)`` and the others make the same objects.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.cache.node import Node
from sim.cache.tuple_new import new_tuple


class MatchResult(NamedTuple):
    cached_len: int  # reusable prefix: the deepest node every component accepts
    full_depth: int  # how deep FULL KV alone would have matched
    node: Node | None  # the node ending at cached_len (the root when nothing matched); None: no tree (vLLM)
    sound_len: int | None = None  # the match a full window allows, where a broken policy went deeper

    @property
    def tree_node(self) -> Node:
        """``node``, for a radix cache's match (vLLM's block manager keeps no tree: it has none)."""
        if self.node is None:
            raise TypeError("a block manager's match has no tree node")
        return self.node

    @property
    def relies_on_freed_window(self) -> bool:
        return self.sound_len is not None and self.sound_len < self.cached_len

    @property
    def blocked(self) -> int:
        """Tokens with FULL KV in the tree that a missing checkpoint or window made unusable."""
        return self.full_depth - self.cached_len


NO_FIRST_CHUNK = "first prefill chunk"  # Refusal.pool of a request whose first chunk gets no page this pass


class Refusal(NamedTuple):
    """Why the pools cannot take a request's next step now (the scheduler waits or retracts)."""

    pool: str
    needed: int
    available: int
    reason: str = ""  # the engine's own account of the refusal, where it has one

    def __str__(self) -> str:
        return self.reason or f"{self.pool} pool: need {self.needed}, at most {self.available} obtainable"


class ChunkPlan(NamedTuple):
    """What one request does in one forward: tokens ``[start, end)`` and where states are saved."""

    request_id: str
    start: int
    end: int
    state_id: int | None  # the request's running MAMBA state
    checkpoints: tuple[tuple[int, int], ...] = ()  # (position, state id) to save after that many tokens


class AdmitResult(NamedTuple):
    match: MatchResult
    copy_state_from: int | None = None


class FinishResult(NamedTuple):
    inserted_len: int  # how much of the sequence the tree now holds for this request


# the makers: every field in order, the declared defaults (tests/test_native_inits.py holds them to the types)
def new_match_result(
    cached_len: int, full_depth: int, node: Node | None, sound_len: int | None = None
) -> MatchResult:
    return new_tuple(MatchResult, (cached_len, full_depth, node, sound_len))


def new_refusal(pool: str, needed: int, available: int, reason: str = "") -> Refusal:
    return new_tuple(Refusal, (pool, needed, available, reason))


def new_chunk_plan(
    request_id: str, start: int, end: int, state_id: int | None, checkpoints: tuple[tuple[int, int], ...] = ()
) -> ChunkPlan:
    return new_tuple(ChunkPlan, (request_id, start, end, state_id, checkpoints))


def new_admit_result(match: MatchResult, copy_state_from: int | None = None) -> AdmitResult:
    return new_tuple(AdmitResult, (match, copy_state_from))


def new_finish_result(inserted_len: int) -> FinishResult:
    return new_tuple(FinishResult, (inserted_len,))
