"""The cache interface the scheduler, the replay loop, the engine and the metrics use.

Two managers satisfy ``CacheModel``: the radix ``CacheManager`` (``sim/cache/manager.py``: SGLang,
FreeToken, Marconi, no cache; separate pools or one byte budget) and ``BlockCacheManager``
(``sim/cache/blocks/manager.py``: vLLM; one shared block pool). Each engine's registry entry
(``sim/engines/``) says which it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol

from sim.cache.components import Component
from sim.cache.events import EventBus
from sim.cache.misses import MissWatcher
from sim.cache.policy import Policy
from sim.cache.pools import PoolUsage
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, Refusal
from sim.models import ModelSpec
from sim.tokens import TokenSeq
from sim.trace.trace import Trace


class RequestView(Protocol):
    kv_len: int  # tokens whose KV is computed (the scheduler reads it to tell prefill from decode)


class CacheModel(Protocol):
    """Exactly what callers outside ``sim/cache`` use of a cache manager."""

    policy: Policy
    model: ModelSpec
    events: EventBus  # what the cache publishes (sim/cache/events.py)
    page_size: int  # the unit of the FULL / SWA pool columns (a page, or vLLM's block)
    has_swa: bool
    has_mamba: bool

    @property
    def requests(self) -> Mapping[str, RequestView]: ...

    def begin_pass(self, in_flight: AbstractSet[str] = frozenset()) -> None:
        """A scheduling pass starts (its admissions and chunks share what the engine reserves per pass;
        ``in_flight``: requests whose last step is launched, not yet processed)."""

    def settle(self, request_id: str, in_flight: int) -> None:
        """An overlap loop processed a step of this request after launching the next one (``in_flight``: the
        request's tokens in that next step): a radix engine commits a prompt it held back (FreeToken), vLLM
        hashes the blocks the processed token completed."""

    def admit(
        self, request_id: str, tokens: TokenSeq, prompt_len: int, budget: int | None = None
    ) -> AdmitResult | Refusal:
        """Match, lock and admit a request (``budget``: the tokens its first chunk may take this step, where
        the engine sizes that chunk before it admits)."""

    def next_chunk_len(self, request_id: str, budget: int) -> int: ...
    def take_page_chunks(self, request_id: str, budget: int) -> int | Refusal:
        """A request prefilling alone: its next chunks of one whole page, where the engine takes them in one
        loop; how many (0: none such), or the refusal of the first the pools cannot hold."""
        ...

    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal: ...
    def complete_prefill(self, request_id: str, chunk_len: int) -> None: ...
    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal: ...
    def complete_decode(self, request_id: str) -> None: ...
    def advance_decode(self, request_id: str, num_steps: int, iteration: int) -> int: ...
    def plain_decode_steps(self, req, iteration: int) -> int: ...
    def stalled_chunk_steps(self, request_id: str, budget: int, max_steps: int) -> int: ...
    def take_plain_decodes(self, req, num_steps: int) -> None: ...
    def finish(self, request_id: str) -> FinishResult: ...
    def abort(self, request_id: str) -> None: ...
    def usage(self) -> dict[Component, PoolUsage]: ...
    def check_integrity(self) -> None: ...
    @property
    def requeues_lone_request(self) -> bool:
        """False: a request retracted while running alone is given up on at once (SGLang aborts it)."""

    def never_fits(self, prompt_len: int, output_len: int) -> str | None:
        """Why a request of this size can never run with these pools (decided before it is queued), or None."""

    def discard(self) -> None:
        """The cache is thrown away mid-run: drop what only the cycle collector could free."""

    def num_evictions(self) -> dict[Component, int]: ...
    def capacities(self) -> dict[Component, int]:
        """What each component could hold at most (0: the cache does not keep it)."""
        ...

    def watch_misses(self, trace: Trace | None = None) -> MissWatcher | None:
        """A watcher, subscribed from now on, of what each admission's match lost and why (None: no
        such watcher for this cache: its blocked ranges are ``blocked_other``). ``trace``: the run's, where the
        watcher may leave out what no request of it can ask (vLLM's private blocks)."""
        ...
