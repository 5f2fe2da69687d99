"""A configuration made concrete: the model (with the window asked for), the policy (its preset with the knobs
given, settled for the GPU by its engine) and the pools' sizes (the engine's sizing of the pool options)."""

from __future__ import annotations

from sim.cache.knobs import NONE
from sim.cache.policy import Policy
from sim.cache.sizing import PoolSizes
from sim.engines.registry import engine_of, make_policy, pool_sizes
from sim.models import ModelSpec, get_model
from sim.run.config import SimConfig


def build(config: SimConfig) -> tuple[ModelSpec, Policy, PoolSizes]:
    model = get_model(config.model)
    knobs = dict(config.knobs)
    if knobs.get("window") not in (None, NONE):  # none: the model's own window
        model = model.replace(window=knobs["window"])
    policy = make_policy(config.policy, **knobs)
    given = frozenset(name for name, value in knobs.items() if value is not None)
    policy = engine_of(policy).settle_for_gpu(policy, config.gpu, given)
    return model, policy, pool_sizes(config, model, policy)
