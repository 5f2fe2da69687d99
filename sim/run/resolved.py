"""A configuration as it really runs: every knob with the preset's and the model's values filled in, the
checkpoint grids, and the pools' sizes. ``simulate`` prints it in its header and JSON; a grid point's key
hashes it, so a changed preset default or model is a new point."""

from __future__ import annotations

from sim.cache.blocks.layout import policy_layout
from sim.cache.resolve import resolve
from sim.engines.registry import knob_values
from sim.run.config import SimConfig
from sim.run.setup import build


def resolved_config(config: SimConfig) -> dict:
    """``{"rules", "cache", "knobs", "grids", "pools"}``; ``knobs`` has every knob, hidden ones included
    (they change results too), ``window`` and ``mamba_chunk`` as the model settles them."""
    model, policy, sizes = build(config)
    resolved = resolve(policy, model)
    knobs = knob_values(policy)
    knobs.update(window=resolved.window, mamba_chunk=resolved.mamba_chunk)
    cache = [c for c, on in (("FULL", True), ("SWA", resolved.has_swa), ("MAMBA", resolved.has_mamba)) if on]
    page = policy.page_size
    pools: dict[str, int | str] = {
        "full_pages": sizes.full_pages,
        "swa_pages": sizes.swa_pages,
        "mamba_states": sizes.states,
        "full_slots": sizes.full_pages * page,
        "swa_slots": sizes.swa_pages * page,
    }
    if sizes.blocks:
        pools.update(shared_blocks(model, policy, sizes.blocks))
    return {
        "rules": policy.engine,
        "cache": "+".join(cache),
        "knobs": knobs,
        "grids": {"checkpoint_grid": resolved.checkpoint_grid, "track_grid": resolved.track_grid},
        "pools": pools,
    }


def shared_blocks(model, policy, num_blocks: int) -> dict:
    """vLLM's one block pool: its block size (derived from the model), groups and size in blocks."""
    layout = policy_layout(model, policy)
    return {
        "blocks": num_blocks,
        "block_size": layout.block_size,
        "groups": " ".join(layout.group_kinds),
        "block_slots": num_blocks * layout.block_size,
    }


def flat_resolved(config: SimConfig, knob_names: tuple[str, ...]) -> dict:
    """A grid point's ``resolved`` record: the named knobs as run and the pool sizes, one level deep."""
    full = resolved_config(config)
    flat = {name: full["knobs"][name] for name in knob_names}
    pools = full["pools"]
    flat.update(
        full_pages=pools["full_pages"], swa_pages=pools["swa_pages"], mamba_pool_states=pools["mamba_states"]
    )
    return flat
