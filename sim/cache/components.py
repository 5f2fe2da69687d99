"""The three kinds of cache memory a node can hold; each has its own pool and its own LRU stamp on a node.

A ``Component`` is a ``str`` (its value), so it keys the pools, the usage and the eviction counts, and names the
step table's columns (``full_free``, ``state_tree``, ...) exactly as the plain strings did. What the outputs
call a component elsewhere is a property: ``pool_name`` in refusals and printouts, ``layer_kind`` in the
summary's keys (``evictions_mamba``) and the model's layer kinds (``sim.models``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Component(StrEnum):
    FULL = "full"
    SWA = "swa"
    MAMBA = "state"  # the table columns' prefix (state_free, state_running, state_tree)

    @property
    def pool_name(self) -> str:
        """ "FULL", "SWA" or "MAMBA": the pool as refusals and printouts name it."""
        return _POOL_NAMES[self]

    @property
    def layer_kind(self) -> str:
        """ "full", "swa" or "mamba": the model's layers this memory serves; the summary's ``evictions_*`` keys."""
        return _LAYER_KINDS[self]

    @property
    def stamp(self) -> str:
        """The node attribute holding this component's LRU stamp."""
        return _STAMPS[self]


# module-level names for the hot paths: reading a member off the Enum class costs several times a global lookup;
# ``Final`` lets the compiled core read them as C statics instead of looking them up in the module's dict
FULL: Final = Component.FULL
SWA: Final = Component.SWA
MAMBA: Final = Component.MAMBA

_POOL_NAMES = {Component.FULL: "FULL", Component.SWA: "SWA", Component.MAMBA: "MAMBA"}
_LAYER_KINDS = {Component.FULL: "full", Component.SWA: "swa", Component.MAMBA: "mamba"}
_STAMPS = {Component.FULL: "full_stamp", Component.SWA: "swa_stamp", Component.MAMBA: "state_stamp"}
