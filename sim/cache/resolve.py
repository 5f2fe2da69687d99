"""A policy settled against a model (``resolve``): the window, scan chunk, checkpoint and track grids and the
components the cache manager and the engine's rules run with."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.cache.components import Component
from sim.cache.policy import Policy
from sim.models import ModelSpec


@dataclass(frozen=True)
class Resolved:
    """A policy settled against a model: what the cache manager and its rules run with."""

    policy: Policy
    page_size: int
    window: int  # effective SWA window (0 without SWA)
    mamba_chunk: int
    checkpoint_grid: int  # prefill checkpoints: lcm(chunk, page)
    track_grid: int  # decode checkpoints: lcm(checkpoint grid, track interval)
    has_swa: bool
    has_mamba: bool
    window_slack: int  # deliberately wrong policies only


def resolve(policy: Policy, model: ModelSpec) -> Resolved:
    page = policy.page_size
    chunk = policy.mamba_chunk or model.mamba_chunk or 1
    grid = math.lcm(chunk, page)
    window = model.window if policy.window is None else policy.window
    return Resolved(
        policy,
        page,
        window,
        chunk,
        grid,
        math.lcm(grid, policy.track_interval),
        model.has_swa and not policy.full_only,
        model.has_mamba and not policy.full_only,
        page if policy.window_slack == -1 else policy.window_slack,
    )


def describe_resolved(resolved: Resolved) -> str:
    """One line: the rules, every knob as run, and what the model settles (window, chunk, grids)."""
    policy = resolved.policy
    held = (True, resolved.has_swa, resolved.has_mamba)
    components = "+".join(comp.pool_name for comp, on in zip(Component, held, strict=True) if on)
    knobs = ", ".join(f"{name} {_shown(value)}" for name, value in policy.knob_items().items())
    return (
        f"rules {policy.engine}, cache {components}; {knobs}; resolved: window {resolved.window}, "
        f"mamba_chunk {resolved.mamba_chunk}, checkpoint grid {resolved.checkpoint_grid}, "
        f"track grid {resolved.track_grid}"
    )


def _shown(value: object) -> str:
    return "none" if value is None else str(value)
