"""The cost model: what one engine step costs in seconds on a GPU.

``gpus`` the GPU presets; ``shape`` a step's batch (``StepShape``); ``model`` the roofline ``CostModel``;
``calibration`` the executor-fitted coefficients that replace the roofline. The names below are the package's
interface; modules inside the package import each other directly.
"""

from __future__ import annotations

from sim.cost.gpus import GPUS, GPUSpec, get_gpu
from sim.cost.model import CostModel, StepCost, step_bytes, step_flops
from sim.cost.shape import StepShape, attended_sum

__all__ = [
    "GPUS",
    "GPUSpec",
    "get_gpu",
    "CostModel",
    "StepCost",
    "step_bytes",
    "step_flops",
    "StepShape",
    "attended_sum",
]
