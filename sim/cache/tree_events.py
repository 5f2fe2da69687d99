"""The radix tree's events (``sim/cache/events.py`` re-exports them), each published before the tree changes.

The hot ones write their ``__init__`` out: compiled, a dataclass's generated ``__init__`` is an interpreted function
(mypyc keeps the dataclass machinery's), one Python frame an event; these are native, and set the frozen fields as the
generated one does (tests/test_native_inits.py holds them to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.cache.components import Component


@dataclass(frozen=True, slots=True)
class Evicting:
    """An eviction of ``component`` is about to take ``node``'s share of it."""

    component: Component
    node: Any

    def __init__(self, component: Component, node: Any) -> None:
        object.__setattr__(self, "component", component)
        object.__setattr__(self, "node", node)


@dataclass(frozen=True, slots=True)
class Tombstoning:
    node: Any  # its SWA pages are about to be freed (FULL kept)

    def __init__(self, node: Any) -> None:
        object.__setattr__(self, "node", node)


@dataclass(frozen=True, slots=True)
class TombstoningRun:
    """``Tombstoning`` for each of ``nodes`` (live), in order, as one event: FreeToken's finish trim tombstones
    a hundred nodes of a path at once late in a run (``RadixTree.tombstone_run``)."""

    nodes: Any

    def __init__(self, nodes: Any) -> None:
        object.__setattr__(self, "nodes", nodes)


@dataclass(frozen=True, slots=True)
class StateDropping:
    node: Any  # its MAMBA state is about to be freed

    def __init__(self, node: Any) -> None:
        object.__setattr__(self, "node", node)


@dataclass(frozen=True, slots=True)
class LeafDeleting:
    node: Any  # about to leave the tree with all it holds

    def __init__(self, node: Any) -> None:
        object.__setattr__(self, "node", node)


@dataclass(frozen=True, slots=True)
class LeafEvicted:
    """``Evicting(FULL, node)``, ``LeafDeleting``, ``Tombstoning`` and ``StateDropping`` of one leaf, in that
    order, as one event. An observer of this kind subscribes to the four too and takes this one as the four
    (``TreeMissTracker``), so where each of the five kinds has one handler they are one observer's, and
    vLLM+'s per-chunk eviction publishes this instead of the four (``marconi_vllm_direct.told_as_one``).
    Only a tree that never counts an SWA eviction publishes it (Marconi's), so the tombstone's reset of a
    pending SWA count has nothing to reset."""

    node: Any


@dataclass(frozen=True, slots=True)
class Split:
    upper: Any  # the new node above
    lower: Any  # the old node, now below it

    def __init__(self, upper: Any, lower: Any) -> None:
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "lower", lower)
