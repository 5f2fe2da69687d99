"""A step's skipped blocks told to the why watcher: one ``BlocksSkipped`` for the groups the mask left the same
keys unhashed in (``steps.cache_blocks``' last act)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache.events import BlocksSkipped, emit


def tell_skipped(on_skip: list[Callable[[Any], None]], keys_of_group: dict[int, list]) -> None:
    """One ``BlocksSkipped`` for the groups told the same keys, in group order; none for no keys."""
    told: list[tuple[list, list[int]]] = []
    for group, keys in keys_of_group.items():
        if not keys:
            continue
        for seen, groups in told:
            if seen == keys:
                groups.append(group)
                break
        else:
            told.append((keys, [group]))
    for keys, groups in told:
        emit(on_skip, BlocksSkipped(tuple(groups), keys))
