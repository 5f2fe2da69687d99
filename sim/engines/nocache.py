"""No prefix cache (SGLang ``--disable-radix-cache``): the baseline that reuses nothing. SGLang 0.5.23 builds
the same ``UnifiedRadixCache`` with ``disable=True`` and runs the same ``Scheduler``, so the preset runs
SGLang's own loop (``sim/engines/sglang.py``'s) with its knobs over the null rules."""

from __future__ import annotations

from sim.cache.engines.nocache import NoCacheRules
from sim.cache.engines.sglang_knobs import SGLangKnobs
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.policy import Policy, own_knobs
from sim.cache.sizing import PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import decode_interval_on_pages, radix_manager
from sim.engines.sglang import sglang_loop
from sim.models import ModelSpec
from sim.sched.interface import Scheduler

# SchedulePolicy._validate_and_adjust_policy: over a disabled tree a cache-aware policy is FCFS
CACHE_AWARE_POLICIES = ("lpm", "dfs-weight", "hrrn")
# True: a run nobody reads a page id of runs on pools of anonymous FULL and SWA ids (``Engine.anonymous_manager``),
# so a freeing stretch may take its SWA frees request by request (``sim/sched/counted_frees.py``); False: real ids
# (the reference; tests/test_counted_frees_property.py holds both equal)
ANONYMOUS_PAGES = True


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """SGLang's loop with its knobs, the waiting queue first come first served where the policy needs a tree."""
    knobs = own_knobs(policy, SGLangKnobs)
    order = "fcfs" if knobs.schedule_policy in CACHE_AWARE_POLICIES else knobs.schedule_policy
    # _calculate_mamba_ratio: one MAMBA state a running request with the cache disabled
    return sglang_loop(manager, policy, sizes, knobs.overlap, order, knobs.mixed_chunk, states_per_request=1)


def _anonymous_manager(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
    """The cache of a run nobody reads a page id of: the null rules read none (nothing is matched, kept or
    checkpointed; a request's pages are only moved, counted and freed, a freed SWA entry told by ``is None``)."""
    return radix_manager(NoCacheRules, anonymous_pages=ANONYMOUS_PAGES)(model, policy, sizes, events)


ENGINE = Engine(
    name="none",
    about="no prefix cache: nothing matched, kept or checkpointed; running requests free SWA as SGLang's do",
    knobs=SGLangKnobs,
    presets=(
        Policy(
            name="no-cache",
            engine="none",
            about="no prefix cache (SGLang --disable-radix-cache): the baseline that reuses nothing",
            own=SGLangKnobs(),
        ),
    ),
    manager=radix_manager(NoCacheRules),
    anonymous_manager=_anonymous_manager,
    scheduler=_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=NoCacheRules,
    check=decode_interval_on_pages,
)
