"""Model presets: the layer mix and sizes that set pool bytes, state bytes and FLOPs.

Shared by the simulator (pool sizing, cost model) and the executor (which builds the real network from the same
spec), so a preset is defined once. ``kinds`` the layer kinds; ``spec`` the ``ModelSpec`` and its derived
figures; ``validate`` its checks; ``presets`` the named models (add a model there). The names below are the
package's interface.
"""

from __future__ import annotations

from sim.models.kinds import FULL, LAYER_KINDS, MAMBA, SWA
from sim.models.presets import MODELS, get_model
from sim.models.spec import ModelSpec

__all__ = ["FULL", "LAYER_KINDS", "MAMBA", "SWA", "MODELS", "get_model", "ModelSpec"]
