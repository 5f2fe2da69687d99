"""The engine registry: every engine's entry by name, the presets they bring, and the knob schema over all of
them (the CLI options, grid axes, validation and ``cli.py policies`` are generated from it).

``register(engine)`` adds an engine: its module and that one call are all an engine needs. The built-in ones
are registered on import, and so is the ``ENGINE`` of every module named in ``$HYBRIDCACHE_ENGINES``
(comma-separated dotted names): an engine kept outside this package, seen by every process of a command
(a grid's workers too). A preset is an engine and knob values: ``make_policy(name, **knobs)``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any

from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.knobs import NONE, KnobSpec
from sim.cache.policy import SHARED_KNOBS, Policy, validate
from sim.cache.sizing import PoolOptions, PoolSizes
from sim.engines import freetoken, marconi, negative, nocache, sglang, vllm
from sim.engines.entry import Engine
from sim.engines.pool_sizing import byte_budget
from sim.models import ModelSpec
from sim.sched.interface import Scheduler

ENGINES: dict[str, Engine] = {}
PRESETS: dict[str, Policy] = {}
# every knob of every engine: the shared ones, each engine's own (registry order), the negative controls'
KNOBS: dict[str, KnobSpec] = {}
CLI_KNOBS: dict[str, KnobSpec] = {}  # the same without the hidden ones
_CONTROLS: list[str] = []  # the negative controls' names: listed after every engine's presets


def register(engine: Engine) -> None:
    """Add ``engine`` and its presets; ValueError when a name is taken or a knob contradicts another's."""
    if engine.name in ENGINES:
        raise ValueError(f"engine {engine.name!r} is registered already")
    for preset in engine.presets:
        if preset.name in PRESETS:
            raise ValueError(f"preset {preset.name!r} is registered already")
        if preset.engine != engine.name or type(preset.own) is not engine.knobs:
            raise ValueError(f"preset {preset.name!r} is not {engine.name}'s (engine or knob class differs)")
    schema = _schema([*ENGINES.values(), engine])
    ENGINES[engine.name] = engine
    controls = {name: PRESETS.pop(name) for name in _CONTROLS}
    PRESETS.update({preset.name: preset for preset in engine.presets})
    PRESETS.update(controls)
    _set_schema(schema)


def unregister(name: str) -> None:
    """Remove an engine and its presets (a test's toy engine, once the test is done)."""
    engine = ENGINES.pop(name)
    for preset in engine.presets:
        del PRESETS[preset.name]
    _set_schema(_schema(list(ENGINES.values())))


def _set_schema(schema: dict[str, KnobSpec]) -> None:
    KNOBS.clear()
    KNOBS.update(schema)
    CLI_KNOBS.clear()
    CLI_KNOBS.update({name: spec for name, spec in schema.items() if not spec.hidden})


def _schema(engines: list[Engine]) -> dict[str, KnobSpec]:
    own: dict[str, KnobSpec] = {}
    for engine in engines:
        for name, spec in engine.knobs.specs().items():
            if name in SHARED_KNOBS:
                raise ValueError(f"{engine.name}'s knob {name!r} is a shared knob's name")
            known = own.get(name)
            if known is not None and dataclasses.replace(known, engines=None) != spec:
                raise ValueError(f"{engine.name}'s knob {name!r} differs from {known.engines}'s")
            readers = (*(known.engines or () if known else ()), engine.name)
            own[name] = dataclasses.replace(spec, engines=readers)
    shared = {name: spec for name, spec in SHARED_KNOBS.items() if not spec.hidden}
    hidden = {name: spec for name, spec in SHARED_KNOBS.items() if spec.hidden}
    return shared | own | hidden


def engine_of(policy: Policy) -> Engine:
    return ENGINES[policy.engine]


def policy_names() -> list[str]:
    return list(PRESETS)


def make_policy(name: str, **knobs: object) -> Policy:
    """The preset ``name`` with ``knobs`` overriding its defaults: None values are ignored (not given),
    ``"none"`` sets a nullable knob to None."""
    if name not in PRESETS:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(PRESETS)}")
    base = PRESETS[name]
    given = {k: v for k, v in knobs.items() if v is not None}
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise ValueError(f"unknown policy knob(s) {unknown}; known: {', '.join(KNOBS)}")
    for knob in given:
        engines = KNOBS[knob].engines
        if engines is not None and base.engine not in engines:
            raise ValueError(
                f"{KNOBS[knob].flag} applies to {', '.join(engines)} policies only; "
                f"{name!r} runs {base.engine}'s rules"
            )
    values: dict[str, Any] = {k: None if v == NONE and KNOBS[k].nullable else v for k, v in given.items()}
    policy = base.with_knobs(**values)
    validate(policy)
    engine_of(policy).check(policy)
    return policy


def knob_values(policy: Policy) -> dict[str, object]:
    """The knobs the policy's engine reads, as this policy runs them (the shared ones it reads, its own, and
    the negative controls' hidden ones): another engine's knob, or a shared one it ignores, is not there."""
    engine = engine_of(policy)
    values = policy.knob_items(hidden=True)
    return {name: value for name, value in values.items() if KNOBS[name].hidden or engine.reads_knob(name)}


def pool_sizes(config: PoolOptions, model: ModelSpec, policy: Policy) -> PoolSizes:
    """The policy's engine's pools for these options; one byte budget only for an engine that keeps one."""
    engine = engine_of(policy)
    if config.cache_bytes is None:
        return engine.pool_sizes(config, model, policy)
    if not engine.byte_budget:
        supported = ", ".join(name for name, entry in ENGINES.items() if entry.byte_budget)
        raise ValueError(
            f"--cache-bytes (one byte budget) applies to {supported} policies only; {policy.name!r} "
            f"runs {policy.engine}'s pools"
        )
    return byte_budget(config, model, policy)


def make_manager(
    model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus | None = None, ids_read: bool = True
) -> CacheModel:
    """The cache manager of the policy's engine, publishing on ``events``; ``ids_read`` False: for a run whose
    page ids nobody reads (the engine's ``anonymous_manager`` where it has one)."""
    engine = engine_of(policy)
    anonymous = engine.anonymous_manager
    factory = anonymous if not ids_read and anonymous is not None else engine.manager
    return factory(model, policy, sizes, events if events is not None else EventBus())


def make_scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    return engine_of(policy).scheduler(manager, policy, sizes)


for _engine in (nocache.ENGINE, sglang.ENGINE, freetoken.ENGINE, marconi.ENGINE, vllm.ENGINE):
    register(_engine)
for _control in negative.negative_controls(PRESETS):
    PRESETS[_control.name] = _control
    _CONTROLS.append(_control.name)
for _module in filter(None, (name.strip() for name in os.environ.get("HYBRIDCACHE_ENGINES", "").split(","))):
    register(importlib.import_module(_module).ENGINE)
