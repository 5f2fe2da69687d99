"""Typed events the cache, the tree, the scheduler and the engine publish, and the bus observers subscribe on.

Observers (the why column's watcher, the bounds recorder, the step log, the executor's poisoning of freed
memory) subscribe to the kinds they need; nothing replaces a method of a live object. A publisher on a hot
path holds its kind's handler list (``channel``) and builds an event only when the list is not empty, so a
run nobody watches pays one truth test per event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sim.cache.components import Component
from sim.cache.counted_pages import PageList

E = TypeVar("E")


class EventBus:
    def __init__(self) -> None:
        self._channels: dict[type, list[Callable[[Any], None]]] = {}
        self._batch_readers: list[Callable[[Any], None]] = []  # ``subscribe_batch_reader``'s

    def channel(self, kind: type) -> list[Callable[[Any], None]]:
        """The handlers of ``kind``: the same list object for the bus's life, filled as observers subscribe."""
        return self._channels.setdefault(kind, [])

    def subscribe(self, kind: type[E], handler: Callable[[E], None]) -> None:
        self.channel(kind).append(handler)

    def subscribe_batch_reader(self, handler: Callable[[Any], None]) -> None:
        """``handler`` on ``StepStarted``, reading of a batch run's steps only their batches (as the bounds' recorder
        reads a ``DecodeBatch``: its lengths), not the manager's state nor the order against other events: a loop may
        then announce a run's steps after the requests it ended finish (``last_output.py``), all in one event whose
        batch is ``sim/sched/run_steps.RunSteps``, which a batch reader reads as the steps' own events in order."""
        self.subscribe(StepStarted, handler)
        self._batch_readers.append(handler)

    def only_batch_readers(self) -> bool:
        """Whether every ``StepStarted`` handler is a batch reader (``subscribe_batch_reader``)."""
        readers = self._batch_readers
        return all(any(handler is reader for reader in readers) for handler in self.channel(StepStarted))

    def reads_batches(self) -> bool:
        """Whether a ``StepStarted`` handler reads the steps' batches (the bounds' recorder): runs then make them."""
        return bool(self.channel(StepStarted))

    def reads_step_events(self) -> bool:
        """Whether a handler reads a run's steps one event each (``StepEnded``, ``PlainStepsEnded``)."""
        return bool(self.channel(StepEnded) or self.channel(PlainStepsEnded))

    def publish(self, event: object) -> None:
        for handler in self._channels.get(type(event), ()):
            handler(event)

    def close(self) -> None:
        """Drop every handler (the run is over). An observer holds what it watches and the publisher holds
        the observer's handlers: left connected, a finished run is cyclic garbage (a vLLM replay: 332,099
        objects, the block pool's keys), freed only by the next collection's walk over all of it."""
        for handlers in self._channels.values():
            handlers.clear()


def emit(channel: list[Callable[[Any], None]], event: object) -> None:
    for handler in channel:
        handler(event)


# ---- the cache manager ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Matched:
    """A prompt's match, before anything is locked or reserved (admission may still refuse it)."""

    tokens: Any  # TokenSeq
    prompt_len: int
    cached_len: int
    full_depth: int

    def __init__(
        self, tokens: Any, prompt_len: int, cached_len: int, full_depth: int
    ) -> None:  # native (``tree_events.py``)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "prompt_len", prompt_len)
        object.__setattr__(self, "cached_len", cached_len)
        object.__setattr__(self, "full_depth", full_depth)


@dataclass(frozen=True, slots=True)
class Admitted:
    request_id: str
    cached_len: int

    def __init__(self, request_id: str, cached_len: int) -> None:  # native (``tree_events.py``)
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "cached_len", cached_len)


@dataclass(frozen=True, slots=True)
class Inserted:
    """The request's ``[0, end)`` handed to the tree."""

    request_id: str
    end: int


@dataclass(frozen=True, slots=True)
class SwaFreed:
    """The request's own SWA pages below ``frontier`` went back to the pool."""

    request_id: str
    frontier: int
    num_pages: int


@dataclass(frozen=True, slots=True)
class CheckpointSaved:
    request_id: str
    position: int
    state: int


@dataclass(frozen=True, slots=True)
class FinishStarted:
    request_id: str

    def __init__(self, request_id: str) -> None:  # native (``tree_events.py``)
        object.__setattr__(self, "request_id", request_id)


@dataclass(frozen=True, slots=True)
class Finished:
    request_id: str
    inserted_len: int

    def __init__(self, request_id: str, inserted_len: int) -> None:  # native (``tree_events.py``)
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "inserted_len", inserted_len)


@dataclass(frozen=True, slots=True)
class Aborted:
    request_id: str


@dataclass(frozen=True, slots=True)
class SlotsFreed:
    """Ids a pool took back (pages or states): whatever they held is garbage from now on."""

    component: Component
    ids: PageList  # counted where the pool is anonymous (``request.COUNTED_PAGES``)


@dataclass(frozen=True, slots=True)
class BlocksDiscarded:
    """vLLM blocks whose contents died: freed without a hash (no one can hit them), or evicted while cached.
    A cached free block is still alive."""

    group: int
    blocks: list[int]


# ---- the radix tree: each published before the tree changes (``tree_events.py``) ---------------------------
from sim.cache.tree_events import (  # noqa: E402, F401  (re-exported: every observer imports them from here)
    Evicting,
    LeafDeleting,
    LeafEvicted,
    Split,
    StateDropping,
    Tombstoning,
    TombstoningRun,
)


# ---- vLLM's block pool (sim/cache/blocks/) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BlockHit:
    """An admitted request's prefix-cache hit, before its blocks are touched: the block keys of its prompt,
    the reconciled hit and FULL's answer alone (tokens)."""

    request_id: str
    chain: list  # block keys (bytes), one per whole prompt block
    cached_len: int
    full_len: int


@dataclass(frozen=True, slots=True)
class BlocksEvicted:
    """Cached blocks lost their hash to one allocation, oldest first: their block keys and, in the same order,
    their groups (told apart, as the pool holds them: no pair made a block); ``keys`` pairs them, (block key,
    group). Where the run told the manager its trace (``watch_misses``), the blocks only their own request could
    hold are left out (``blocks/private.py``: no question of the why watcher reads them)."""

    block_keys: list
    groups: list

    @property
    def keys(self) -> list:
        """The (block key, group) of each evicted block, oldest first."""
        return list(zip(self.block_keys, self.groups, strict=True))


@dataclass(frozen=True, slots=True)
class BlocksSkipped:
    """Blocks a request computed and held when they filled, left unhashed by the retention interval's mask:
    their block keys, the same in each of ``groups`` (a model's SWA or Mamba groups skip alike: one event,
    one set in the watcher, for all of them). No later request can hit them. As ``BlocksEvicted``, a request's
    blocks only it could hold are not told where the run told the manager its trace."""

    groups: tuple[int, ...]
    keys: list


# ---- the scheduler and the engine -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Retracted:
    request_id: str
    reached: int  # tokens it had computed
    why: str


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A batch about to run (timed mode), with the manager its plans came from. ``num_steps`` > 1: that many
    decode-only steps of a batch run (``sim/sched/sglang_runs.py``), each item one token further at each step
    than at the step before (the batch is the first step's; only the fast path sends these)."""

    batch: Any
    manager: Any
    num_steps: int = 1


@dataclass(frozen=True, slots=True)
class StepEnded:
    """A step ran: its row of the step table (``sim/run/step_log.py``) and the pools after it."""

    step: tuple  # iteration, started at, duration, prefills, prefill tokens, decodes
    pools: tuple  # the pool columns, after the step


@dataclass(frozen=True, slots=True)
class PlainStepsEnded:
    """Steps of the fast path: decodes only, nothing allocated; the pools read as after the step before."""

    first_step: int
    starts: list[float]
    durations: list[float]
    num_decode: int
