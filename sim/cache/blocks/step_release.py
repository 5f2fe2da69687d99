"""A step's releases taken a kind's groups at once (``BY_KIND``): ``steps.release_skipped`` where a kind's
groups (consecutive in group order, one block size) have tables of one shape.

``vllm``'s model has three SWA groups and four Mamba groups, all of one block size and built by the same
allocations, so a prefill step releases the same positions of each: the window's live run (hundreds of blocks)
in every SWA group, the state at ``retired`` in every Mamba group. The reference asks each group alone: its
window top, the live run searched from a 1,024-slot stretch, the hashed runs worked out, three pool calls a
group. Here the first SWA group's live run is searched once and each other group's checked to be the same
positions (a null below, none inside), the hashed runs (the same: one block size, one ``num_cached``, one hit)
worked out once; the Mamba groups' freed states read unhashed in one pass and put on the queue's head a group
at a time, in group order, as the reference's ``free_blocks`` calls put them. The frees, the tables and the
retired counts end as the reference's, in its order; any other shape takes the reference group by group.
Nothing is told where no discard is told (a discard told: the reference). Off: ``steps.release_skipped``, the
reference (tests/test_vllm_step_release_property.py holds the two equal).
"""

from __future__ import annotations

from sim.cache.blocks import by_id, null_runs, steps
from sim.cache.blocks.hashed_positions import HashedPositions, live_below, split_runs
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.models import MAMBA, SWA

BY_KIND = True
# each layout's kinds as runs of consecutive groups of one kind, in group order (computed once a layout)
_KIND_RUNS: dict[tuple[str, ...], list[tuple[str, list[int]]]] = {}
# the steps whose windows and states were released a kind at once, and whose windows were not (another
# shape: the reference, group by group): the tests' proof each path is taken
TAKEN = {"windows": 0, "states": 0, "each": 0}


def release_step(
    layout: Layout,
    pool: BlockPool,
    req: BlockRequest,
    processed: int,
    early: bool,
    hashed: HashedPositions | None,
) -> None:
    """``steps.release_skipped(layout, pool, req, processed, early, hashed)``."""
    if not BY_KIND or early or hashed is None or pool._discarded or not layout.uniform_block:
        steps.release_skipped(layout, pool, req, processed, early, hashed)
        return
    state_last = steps.last_state(layout, processed)
    for kind, groups in kind_runs(layout.group_kinds):
        if kind == SWA:
            _release_windows(layout, pool, req, groups, processed, hashed)
        elif kind == MAMBA and processed > 1:
            _release_states(pool, req, groups, state_last)


def kind_runs(group_kinds: tuple[str, ...]) -> list[tuple[str, list[int]]]:
    """The groups as runs of one kind, in group order."""
    runs = _KIND_RUNS.get(group_kinds)
    if runs is None:
        runs = []
        for group, kind in enumerate(group_kinds):
            if runs and runs[-1][0] == kind:
                runs[-1][1].append(group)
            else:
                runs.append((kind, [group]))
        _KIND_RUNS[group_kinds] = runs
    return runs


def _release_windows(
    layout: Layout,
    pool: BlockPool,
    req: BlockRequest,
    groups: list[int],
    processed: int,
    hashed: HashedPositions,
) -> None:
    """``release_window`` of each of ``groups`` (SWA, in order), as ``release_skipped`` asks each."""
    tables, swa_top = req.tables, steps.window_top(layout, processed)
    first = tables[groups[0]]
    top = min(len(first) - 1, swa_top)
    if top < 0 or first[top] is None:
        if len(groups) == 1 or _none_moves(tables, groups, swa_top):
            return  # most steps: the window's first block has not moved
    else:
        live = live_below(first, top)
        if _same_runs(req, groups, top, len(live)):
            _free_windows(pool, req, groups, top + 1, live, hashed)
            TAKEN["windows"] += 1
            return
    TAKEN["each"] += 1
    for group in groups:  # another shape: the reference, group by group
        table = tables[group]
        group_top = min(len(table) - 1, swa_top)
        if group_top >= 0 and table[group_top] is not None:
            steps.release_window(layout, pool, table, group, processed, 0, hashed, req)


def _none_moves(tables: list[list[int | None]], groups: list[int], swa_top: int) -> bool:
    """No group's window top is held (nothing to release in any)."""
    for group in groups:
        table = tables[group]
        top = min(len(table) - 1, swa_top)
        if top >= 0 and table[top] is not None:
            return False
    return True


def _same_runs(req: BlockRequest, groups: list[int], top: int, num_live: int) -> bool:
    """Every group's table as long as the first's, hashed as far, its live run from ``top`` down the same
    positions (``num_live`` slots, none null, a null or the table's start below them)."""
    tables, num_cached = req.tables, req.num_cached
    length, cached, lo = len(tables[groups[0]]), num_cached[groups[0]], top + 1 - num_live
    for group in groups[1:]:
        table = tables[group]
        if len(table) != length or num_cached[group] != cached or (lo and table[lo - 1] is not None):
            return False
        if by_id.has_none(table[lo : top + 1]):
            return False
    return True


def _free_windows(
    pool: BlockPool, req: BlockRequest, groups: list[int], stop: int, live: list[int], hashed: HashedPositions
) -> None:
    """Each group's live run ``[stop - len(live), stop)`` freed, highest first, parted by the runs worked out
    once, then nulled (``HashedPositions.release`` and ``release_window``'s write, a group at a time)."""
    num_live, tables = len(live), req.tables
    lo = stop - num_live
    runs = hashed.hashed_runs(req, groups[0], lo, stop)
    for group in groups:
        table = tables[group]
        if group != groups[0]:
            live = table[lo:stop]  # type: ignore[assignment]  # no null: ``_same_runs``
            live.reverse()
        pool.free_split(*split_runs(runs, stop, live), group)
        table[lo:stop] = [None] * num_live


def _release_states(pool: BlockPool, req: BlockRequest, groups: list[int], state_last: int) -> None:
    """``release_states`` of each of ``groups`` (Mamba, in order); the freed states, all unhashed (the usual),
    put on the queue's head a group at a time in one call, else each group's ``free_held``."""
    tables, retired = req.tables, req.retired
    freed_of: list[tuple[int, list[int]]] = []
    for group in groups:
        below = retired[group]
        last = min(state_last, len(tables[group]))
        if last <= below:
            continue  # most steps: the running state's block has not moved
        freed = null_runs.states_below(tables[group], below, last)
        if freed:
            freed_of.append((group, freed))
        retired[group] = last
    if not freed_of:
        return
    TAKEN["states"] += 1
    if len(freed_of) == 1 or not by_id.all_none(pool.key_at, [b for _, freed in freed_of for b in freed]):
        for group, freed in freed_of:
            pool.free_held(freed, group)
        return
    for group, freed in freed_of:
        pool._free_unhashed(freed, group, MAMBA)
