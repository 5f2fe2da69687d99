"""What the radix engines (SGLang, FreeToken, Marconi, no cache) share on their entries: the radix cache
manager with the engine's rules, SGLang's running-request cap, and the decode interval's page rule."""

from __future__ import annotations

from sim.cache.components import FULL, SWA
from sim.cache.engines.base import EngineRules
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.manager import CacheManager
from sim.cache.policy import Policy
from sim.cache.sizing import PoolSizes
from sim.engines.entry import ManagerFactory
from sim.models import ModelSpec
from sim.sched.default import DefaultScheduler
from sim.sched.interface import Scheduler

# SGLang caps running requests at a third of the MAMBA pool (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO):
# a running state plus two ping-pong checkpoint slots each, so admission never starves the pool
MAMBA_STATES_PER_REQUEST = 3


def radix_manager(rules: type[EngineRules], anonymous_pages: bool = False) -> ManagerFactory:
    """The radix cache manager running ``rules``. ``anonymous_pages``: its FULL and SWA pools hand out one id
    for every page (``Pool.make_anonymous``), for a run nobody reads a page id of, under rules that read none
    (``Engine.anonymous_manager``): at page 1 a request's pages are a list per token, and the distinct ints'
    copies and frees were a third of a FreeToken replay."""

    def make(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
        manager = CacheManager(model, policy, sizes, rules, events)
        if anonymous_pages:
            manager.pools[FULL].make_anonymous()
            manager.pools[SWA].make_anonymous()  # (one pool twice where FULL and SWA share one)
        return manager

    return make


def capped_scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """The default loop, its running requests capped by the MAMBA pool of separate pools (a byte budget
    has no MAMBA pool of its own to cap by)."""
    cap = policy.max_running_requests
    if manager.has_mamba and sizes.budget_bytes is None:
        cap = max(1, min(cap, sizes.states // MAMBA_STATES_PER_REQUEST))
    return DefaultScheduler(manager, policy.chunked_prefill_size, cap)


def decode_interval_on_pages(policy: Policy) -> None:
    """A decode checkpoint interval lands on page boundaries."""
    if policy.track_interval % policy.page_size:
        raise ValueError(
            f"track_interval {policy.track_interval} must be a multiple of page_size {policy.page_size}"
        )
