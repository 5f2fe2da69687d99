"""A configuration made concrete, once per run: the model (with the window asked for), the policy (its preset
with the knobs given, settled for the GPU by its engine) and the pools' sizes (the engine's sizing of the pool
options). ``RunSetup`` is passed on from there: the run, its printed header and its grid key read the same one."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.knobs import NONE
from sim.cache.policy import Policy
from sim.cache.sizing import PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_views import PoolLayout
from sim.engines.registry import engine_of, make_policy, pool_sizes
from sim.models import ModelSpec, get_model
from sim.run.config import SimConfig


@dataclass(frozen=True)
class RunSetup:
    config: SimConfig
    model: ModelSpec
    policy: Policy
    sizes: PoolSizes

    @property
    def engine(self) -> Engine:
        return engine_of(self.policy)

    def pool_layout(self) -> PoolLayout:
        """The pools as the engine names and counts them (headers, figures)."""
        return self.engine.pool_layout(self.model, self.policy, self.sizes)


def build(config: SimConfig) -> RunSetup:
    model = get_model(config.model)
    knobs = dict(config.knobs)
    if knobs.get("window") not in (None, NONE):  # none: the model's own window
        model = model.replace(window=knobs["window"])
    policy = make_policy(config.policy, **knobs)
    given = frozenset(name for name, value in knobs.items() if value is not None)
    policy = engine_of(policy).settle_for_gpu(policy, config.gpu, given)
    return RunSetup(config, model, policy, pool_sizes(config, model, policy))
