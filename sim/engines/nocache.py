"""No prefix cache (SGLang ``--disable-radix-cache``): the baseline that reuses nothing."""

from __future__ import annotations

from sim.cache.engines.nocache import NoCacheRules
from sim.cache.policy import EngineKnobs, Policy
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import capped_scheduler, decode_interval_on_pages, radix_manager

ENGINE = Engine(
    name="none",
    about="no prefix cache: nothing matched or kept; running requests free SWA and checkpoint as SGLang's",
    knobs=EngineKnobs,
    presets=(
        Policy(
            name="no-cache",
            engine="none",
            about="no prefix cache (SGLang --disable-radix-cache): the baseline that reuses nothing",
        ),
    ),
    manager=radix_manager(NoCacheRules),
    scheduler=capped_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=NoCacheRules,
    check=decode_interval_on_pages,
)
