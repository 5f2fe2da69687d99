"""The cache interface the scheduler, the replay loop, the engine and the metrics use, and the factory that
builds the engine's cache manager behind it.

Two managers satisfy ``CacheModel``: the radix ``CacheManager`` (``sim/cache/manager.py``: SGLang,
FreeToken, no cache; separate pools) and ``BlockCacheManager`` (``sim/cache/blocks/manager.py``: vLLM; one
shared block pool). A preset's engine picks one through the engine registry: an engine whose rules class
offers ``manager_class`` runs that manager; the others run ``CacheManager``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sim.cache.byte_budget import byte_budget_sizes
from sim.cache.components import Component
from sim.cache.engines import ENGINES
from sim.cache.policy import Policy
from sim.cache.pools import PoolUsage
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, Refusal
from sim.cache.sizing import PoolSizes
from sim.models import ModelSpec
from sim.tokens import TokenSeq


class RequestView(Protocol):
    kv_len: int  # tokens whose KV is computed (the scheduler reads it to tell prefill from decode)


class Topology(Protocol):
    name: str  # "separate" (a pool per component) or "shared-blocks" (vLLM's one pool)


class CacheModel(Protocol):
    """Exactly what callers outside ``sim/cache`` use of a cache manager."""

    policy: Policy
    model: ModelSpec
    page_size: int  # the unit of the FULL / SWA pool columns (a page, or vLLM's block)
    has_swa: bool
    has_mamba: bool
    topology: Topology

    @property
    def requests(self) -> Mapping[str, RequestView]: ...

    def admit(self, request_id: str, tokens: TokenSeq, prompt_len: int) -> AdmitResult | Refusal: ...
    def next_chunk_len(self, request_id: str, budget: int) -> int: ...
    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal: ...
    def complete_prefill(self, request_id: str, chunk_len: int) -> None: ...
    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal: ...
    def complete_decode(self, request_id: str) -> None: ...
    def advance_decode(self, request_id: str, num_steps: int, iteration: int) -> int: ...
    def plain_decode_steps(self, req, iteration: int) -> int: ...
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

    def num_evictions(self) -> dict[Component, int]: ...


def manager_class(policy: Policy):
    return getattr(ENGINES[policy.engine], "manager_class", None)


def make_manager(model: ModelSpec, policy: Policy, sizes: PoolSizes) -> CacheModel:
    """The cache manager of the policy's engine."""
    custom = manager_class(policy)
    if custom is not None:
        return custom()(model, policy, sizes)
    from sim.cache.manager import CacheManager

    return CacheManager(model, policy, sizes)


def settle_for_gpu(policy: Policy, gpu: str, given: set[str]) -> Policy:
    """Knobs an engine derives from the GPU it runs on, where the user did not give them (vLLM's batch
    defaults and GDN prefill backend); other engines' policies are returned as they are."""
    settle = getattr(ENGINES[policy.engine], "settle_for_gpu", None)
    return policy if settle is None else settle(policy, gpu, given)


def shared_pool_sizes(
    model: ModelSpec, policy: Policy, memory_bytes: int, pool_tokens: int | None
) -> PoolSizes | None:
    """The pool of an engine with one shared block pool, or None for engines with a pool per component."""
    sizes = getattr(ENGINES[policy.engine], "pool_sizes", None)
    return None if sizes is None else sizes(model, policy, memory_bytes, pool_tokens)


def budget_sizes_for(model: ModelSpec, policy, budget_bytes: int) -> PoolSizes:
    """``byte_budget_sizes`` for a policy whose engine keeps one budget; ValueError for the others."""
    if not getattr(ENGINES[policy.engine], "supports_byte_budget", False):
        supported = ", ".join(
            name for name, rules in ENGINES.items() if getattr(rules, "supports_byte_budget", False)
        )
        raise ValueError(
            f"--cache-bytes (one byte budget) applies to {supported} policies only; {policy.name!r} "
            f"runs {policy.engine}'s pools"
        )
    return byte_budget_sizes(model, policy.page_size, budget_bytes)


def eviction_counts(manager: CacheModel) -> dict[Component, int]:
    """Evictions per component: the radix tree's, or the block pool's."""
    return manager.num_evictions()
