"""FreeToken 0.2.1 (its SWA cache and its GDN cache): before #200 (the finish-time trim), #488 (no trim),
and the trim with a divergence budget."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.engines.freetoken import FreeTokenRules
from sim.cache.engines.freetoken_knobs import FreeTokenKnobs
from sim.cache.interface import CacheModel
from sim.cache.policy import Policy, own_knobs
from sim.cache.sizing import PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import decode_interval_on_pages, radix_manager
from sim.sched.freetoken import FreeTokenScheduler
from sim.sched.interface import Scheduler

_FREETOKEN = Policy(
    name="freetoken",
    engine="freetoken",
    page_size=1,
    swa_free_trigger="iterations",
    iteration_phase=1,
    mamba_chunk=64,
    max_running_requests=4,  # EngineConfig.max_running_req: the request table's rows
    about="FreeToken 0.2.1 before #200: a finish trims the prompt head's SWA to its last W + 16 tokens",
    own=FreeTokenKnobs(finish_trim_gap=16),
)


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """FreeToken's own loop: ``max_extend_tokens`` per prefill pass, ``max_running_req`` table rows, the
    overlap loop unless switched off (``FREETOKEN_DISABLE_OVERLAP_SCHEDULING``)."""
    overlap = own_knobs(policy, FreeTokenKnobs).overlap
    return FreeTokenScheduler(manager, policy.chunked_prefill_size, policy.max_running_requests, overlap)


ENGINE = Engine(
    name="freetoken",
    about="FreeToken 0.2.1: the overlap commit, the W + 16 lock, the finish trim and re-stamp, scan eviction",
    knobs=FreeTokenKnobs,
    presets=(
        _FREETOKEN,
        replace(
            _FREETOKEN,
            name="freetoken-lazy",
            about="FreeToken PR #488: no finish-time trim; the head goes only when the SWA pool must evict",
            own=FreeTokenKnobs(finish_trim_gap=None),
        ),
        replace(
            _FREETOKEN,
            name="freetoken-budget",
            about="FreeToken's trim kept with a divergence budget D "
            "(finish_trim_gap) instead of 16, as issue #200 suggests",
            own=FreeTokenKnobs(finish_trim_gap=256),
        ),
    ),
    manager=radix_manager(FreeTokenRules),
    # no rule of FreeToken's reads a page id (tests/test_freetoken_anonymous_replay.py)
    anonymous_manager=radix_manager(FreeTokenRules, anonymous_pages=True),
    scheduler=_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=FreeTokenRules,
    check=decode_interval_on_pages,
)
