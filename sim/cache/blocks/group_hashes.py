"""One group's blocks hashed in a step (``steps.cache_blocks``' per-group work): the held blocks at the indices its
mask accepts given their keys, its private ones kept out of the cache map (``out_of_map.py``, ``lazy_keys.py``), a
Mamba group's new keys noted (``MambaManager.cached_blocks_this_step``).

``SKIP_EMPTY``: a group whose mask accepts none of the step's newly full blocks is not asked at all. Under retention
0 (the presets' default) a SWA group's mask keeps only the tails ending at the request's two boundaries and a Mamba
group's only the boundaries' states, so many prefill steps hash nothing in them: of ``vllm``'s 57,645 SWA and Mamba
group hashings at 4,000 Mooncake requests 27,028 had an empty mask, each a pass through empty slices, filters and
the cache map's batch calls that wrote nothing. With no index there is no block to hash, list, mark or note, and no
key: skipping it is exact (the skipped keys told are worked out by the caller either way). Off: every group asked,
the reference (tests/test_vllm_group_hashes_property.py holds the two equal).
"""

from __future__ import annotations

from itertools import repeat
from typing import cast

from sim.cache.blocks import by_id
from sim.cache.blocks.keys import BlockKeys
from sim.cache.blocks.lazy_keys import cache_unkeyed, private_positions
from sim.cache.blocks.out_of_map import cache_private, private_blocks
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest

SKIP_EMPTY = True


def hash_group(
    pool: BlockPool,
    keys: BlockKeys,
    req: BlockRequest,
    group: int,
    keys_of: list,
    stride: int,
    indices: range | list[int],
    cut: int,
    stop: int,
    mamba_keys: set | None,
) -> None:
    """Hash ``req``'s ``group`` blocks at ``indices`` (below ``stop``), its blocks from ``cut`` on private;
    ``mamba_keys``: where a Mamba group's new keys go (None: not a Mamba group, or not noted)."""
    table = req.tables[group]
    blocks, new_keys = hashed_blocks(table, keys_of, stride, indices)
    private = private_blocks(table, indices, cut) if cut < stop else []  # ``blocks``' last ones
    if len(new_keys) < len(blocks):  # the private ones past the key cap (``lazy_keys.py``)
        positions = private_positions(table, indices, cut, stride, private)
        new_keys = cache_unkeyed(pool, keys, req, group, blocks, new_keys, private, positions)
    else:
        cache_private(pool, blocks, new_keys, private, group)
    if mamba_keys is not None:
        mamba_keys.update(zip(new_keys, repeat(group)))


def hashed_blocks(
    table: list[int | None], keys_of: list, stride: int, indices: range | list[int]
) -> tuple[list[int], list[object]]:
    """The held blocks at ``indices`` and their keys; a run with no null (FULL's, a dense mask's:
    hundreds a prefill step) by slicing. Block ``i``'s key is ``keys_of[(i + 1) * stride - 1]``."""
    if isinstance(indices, range) and indices:
        blocks = table[indices.start : indices.stop]
        if not by_id.has_none(blocks):
            keys = keys_of[(indices.start + 1) * stride - 1 : indices.stop * stride : stride]
            return cast(list[int], blocks), keys
    held = [index for index in indices if table[index] is not None]
    held_blocks = cast(list[int], list(map(table.__getitem__, held)))  # one cast, not a call per block
    return held_blocks, [keys_of[(i + 1) * stride - 1] for i in held if (i + 1) * stride <= len(keys_of)]
