"""A configuration as it really runs (a ``RunSetup``, described): every knob with the preset's and the model's
values filled in, the checkpoint grids, and the pools' sizes. ``simulate`` prints it in its header and JSON; a
grid point's key hashes it, so a changed preset default or model is a new point."""

from __future__ import annotations

from sim.cache.blocks.layout import policy_layout
from sim.cache.knobs import NONE
from sim.cache.resolve import resolve
from sim.engines.registry import knob_values
from sim.run.setup import RunSetup


def resolved_config(setup: RunSetup) -> dict:
    """``{"rules", "cache", "knobs", "grids", "pools"}``; ``knobs`` has every knob the policy's engine reads,
    hidden ones included (they change results too), ``window`` and ``mamba_chunk`` as the model settles them;
    ``grids`` what else the model settles (the radix engines' checkpoint and track grids)."""
    model, policy, sizes = setup.model, setup.policy, setup.sizes
    resolved = resolve(policy, model)
    knobs = knob_values(policy)
    settled = {"window": resolved.window, "mamba_chunk": resolved.mamba_chunk}
    knobs.update({name: value for name, value in settled.items() if name in knobs})
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
        "grids": setup.engine.settles(model, policy),
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


def flat_resolved(setup: RunSetup, knob_names: tuple[str, ...]) -> dict:
    """A grid point's ``resolved`` record: the named knobs its engine reads as run (a knob set to none is
    written ``none``; one the engine does not read is left out) and the pool sizes, one level deep."""
    full = resolved_config(setup)
    flat: dict = {name: _none(full["knobs"][name]) for name in knob_names if name in full["knobs"]}
    pools = full["pools"]
    flat.update(
        full_pages=pools["full_pages"], swa_pages=pools["swa_pages"], mamba_pool_states=pools["mamba_states"]
    )
    return flat


def _none(value: object) -> object:
    """A nullable knob set to None is written as its command line writes it: ``none``, not an empty cell."""
    return NONE if value is None else value
