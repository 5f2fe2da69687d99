"""An engine as one typed registry entry: its cache (rules or a manager of its own), scheduler, knobs, pool
sizing, GPU defaults, presets and what ``execute`` supports. Everything a run asks of an engine is a field
here, so nothing outside an engine's own modules tests its name or type, and nothing is probed."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from sim.cache.engines.base import EngineRules
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.misses import MissWatcher
from sim.cache.policy import EngineKnobs, Policy
from sim.cache.resolve import describe_resolved, resolve
from sim.cache.sizing import PoolOptions, PoolSizes
from sim.engines.pool_views import PoolLayout, radix_pool_layout
from sim.models import ModelSpec
from sim.sched.interface import Scheduler

ManagerFactory = Callable[[ModelSpec, Policy, PoolSizes, EventBus], CacheModel]
SchedulerFactory = Callable[[CacheModel, Policy, PoolSizes], Scheduler]
PoolSizing = Callable[[PoolOptions, ModelSpec, Policy], PoolSizes]
Settle = Callable[[Policy, str, AbstractSet[str]], Policy]
Describe = Callable[[Policy, ModelSpec, str], str]
PolicyCheck = Callable[[Policy], None]
WatcherFactory = Callable[[CacheModel, EventBus], MissWatcher | None]
PoolLayoutOf = Callable[[ModelSpec, Policy, PoolSizes], PoolLayout]
Settles = Callable[[ModelSpec, Policy], dict[str, object]]


def as_given(policy: Policy, gpu: str, given: AbstractSet[str]) -> Policy:
    """No knob derives from the GPU."""
    return policy


def describe_radix(policy: Policy, model: ModelSpec, gpu: str) -> str:
    """The rules, every knob as run and what the model settles (window, chunk, grids)."""
    return describe_resolved(resolve(policy, model))


def radix_grids(model: ModelSpec, policy: Policy) -> dict[str, object]:
    """What the model settles beyond the knobs: the prefill checkpoint and decode track grids."""
    resolved = resolve(policy, model)
    return {"checkpoint_grid": resolved.checkpoint_grid, "track_grid": resolved.track_grid}


def accept(policy: Policy) -> None:
    """No combination of knobs the engine refuses beyond each knob's own range."""


def no_watcher(manager: CacheModel, events: EventBus) -> MissWatcher | None:
    return None


@dataclass(frozen=True)
class Engine:
    name: str
    about: str
    knobs: type[EngineKnobs]  # its own knobs (the base class: none)
    presets: tuple[Policy, ...]  # a preset is this engine and knob values
    manager: ManagerFactory  # the cache behind ``CacheModel``
    scheduler: SchedulerFactory  # batch formation, admission and retraction (``sim/sched/``)
    pool_sizes: PoolSizing  # its pools from the pool options (not ``--cache-bytes``: ``byte_budget``)
    rules: type[EngineRules] | None = None  # a radix engine's rules (eviction and topology are theirs)
    settle_for_gpu: Settle = as_given  # knobs it derives from the GPU where the user gave none
    describe: Describe = describe_radix  # ``cli.py policies``' line for a preset
    check: PolicyCheck = accept  # knob combinations it refuses (ValueError naming them)
    byte_budget: bool = False  # ``--cache-bytes``: one byte budget for every pool
    misses: WatcherFactory = no_watcher  # why a match lost what it lost (the ``why`` column)
    executes: str | None = None  # None: ``execute`` runs it; else why not ({policy}: the preset's name)
    # the shared knobs (``Policy``'s fields) its rules read; None: every one. Headers, the simulate JSON and a
    # grid's table list only these (and the engine's own knobs)
    reads: frozenset[str] | None = None
    pool_layout: PoolLayoutOf = radix_pool_layout  # its pools as headers and figures name and count them
    settles: Settles = radix_grids  # what the model settles beyond the knobs, for headers
    # the cache a run nobody reads a page id of runs (a replay's tables hold none; a timed run's where only the
    # simulator's own backend and recorder see its steps) where the rules read none either; None: ``manager``
    anonymous_manager: ManagerFactory | None = None

    def reads_knob(self, name: str) -> bool:
        """Whether ``name`` (a shared knob or one of its own) changes what this engine does."""
        return name in self.knobs.specs() or self.reads is None or name in self.reads
