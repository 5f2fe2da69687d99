"""Engine rules, one module per engine, chosen by name (a preset's ``engine``).

Adding an engine: a module with an ``EngineRules`` subclass (see ``base.py`` for the hooks and what the
manager does around them) and one line in ``ENGINES``; then presets in ``sim/cache/policies.py``.
"""

from __future__ import annotations

from sim.cache.engines.base import EngineRules
from sim.cache.engines.freetoken import FreeTokenRules
from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.nocache import NoCacheRules
from sim.cache.engines.sglang import SGLangRules
from sim.cache.engines.vllm import VllmRules

ENGINES: dict[str, type[EngineRules]] = {
    "sglang": SGLangRules,
    "freetoken": FreeTokenRules,
    "none": NoCacheRules,
    "marconi": MarconiRules,
    "vllm": VllmRules,  # its own cache manager (sim/cache/blocks/), built by sim.cache.interface.make_manager
}


def rules_for(resolved) -> EngineRules:
    """The engine's rules for a resolved policy; ValueError if that engine refuses the configuration."""
    rules = ENGINES[resolved.policy.engine]
    rules.check(resolved)
    return rules.build(resolved)
