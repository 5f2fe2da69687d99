"""SGLang 0.5.23 (``UnifiedRadixCache``, ``ScheduleBatch``, its scheduler's budget): the shipped retain floor
(PR #34729), the behaviour before it, the PR's first TODO, and the plain FULL radix cache."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.engines.sglang import SGLangRules
from sim.cache.engines.sglang_knobs import SGLangKnobs
from sim.cache.interface import CacheModel
from sim.cache.manager import CacheManager
from sim.cache.policy import Policy, own_knobs
from sim.cache.sizing import PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import decode_interval_on_pages, radix_manager
from sim.sched.interface import Scheduler
from sim.sched.sglang import SGLangScheduler

# resolve_max_num_reqs: a request holds its running MAMBA state and two ping-pong track slots, and admission
# keeps room for two more (extra_buffer under the overlap loop): the MAMBA pool caps running requests at a fifth
MAMBA_SLOTS_PER_REQUEST = 5

_SGLANG = Policy(
    name="sglang",
    engine="sglang",
    about="SGLang 0.5.23 with the SWA retain floor switched off: the behaviour PR #34729 fixed",
    own=SGLangKnobs(),
)


def sglang_loop(
    manager: CacheModel,
    policy: Policy,
    sizes: PoolSizes,
    overlap: bool,
    schedule_policy: str,
    mixed: bool,
    states_per_request: int = MAMBA_SLOTS_PER_REQUEST,
) -> Scheduler:
    """SGLang's own loop over a radix cache whose rules answer its budget (``SGLangAdmission``):
    ``--max-running-requests`` capped by the MAMBA pool (separate pools), ``states_per_request`` a request."""
    assert isinstance(manager, CacheManager), "SGLang's loop runs the radix cache manager"
    cap = policy.max_running_requests
    if manager.has_mamba and sizes.budget_bytes is None:
        cap = max(1, min(cap, sizes.states // states_per_request))
    return SGLangScheduler(manager, cap, overlap, schedule_policy, mixed)


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """The overlap loop unless switched off, the waiting queue in ``--schedule-policy`` order, mixed chunks
    if enabled."""
    knobs = own_knobs(policy, SGLangKnobs)
    return sglang_loop(manager, policy, sizes, knobs.overlap, knobs.schedule_policy, knobs.mixed_chunk)


ENGINE = Engine(
    name="sglang",
    about="SGLang 0.5.23: checkpoint_into_tree after every chunk, the SWA retain floor, mamba_track_grid",
    knobs=SGLangKnobs,
    presets=(
        replace(
            _SGLANG,
            name="radix",
            about="a plain FULL-attention radix cache: SWA and MAMBA ignored, the ideal a hybrid can reach",
            full_only=True,
        ),
        _SGLANG,
        replace(
            _SGLANG,
            name="sglang-retain",
            about="SGLang 0.5.23 as shipped (PR #34729): SWA kept down to the request's last checkpoint - W",
            own=SGLangKnobs(retain_floor="request"),
        ),
        replace(
            _SGLANG,
            name="sglang-retain-tree",
            about="PR #34729's first TODO: the floor from the deepest checkpoint on "
            "the request's tree path, so the prefill region is covered too",
            own=SGLangKnobs(retain_floor="tree"),
        ),
    ),
    manager=radix_manager(SGLangRules),
    scheduler=_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=SGLangRules,
    check=decode_interval_on_pages,
)
