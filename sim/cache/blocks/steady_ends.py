"""A steady decode run's ends with their usual work written out in the loop (``STEADY_ENDS``).

``BoundaryRuns._take_ends`` (the reference) calls, for each busy end of a run, the run's frees, the pool's
``get_block_per_group`` and the run's hash, each a call (or three) with its own checks: on ``vllm`` at 4,000,
~86,000 allocating ends, ~82,000 steady state frees and ~33,000 window frees not left for the run's end, each
~4 calls and a list or two. Here the usual case of each is done in the loop itself:
- the window's step left for the run's end (``RunFrees.at_end``): counted;
- a row of unhashed blocks leaving (the window's, where the one below is gone; a steady state's,
  ``RunFrees._steady_states``): nulled and pushed onto the queue's head in order, as ``free_each`` pushes them;
- a block per group where the head holds enough: its top blocks, as ``get_block_per_group`` takes them first.
The pool's held counts are written once at the run's end: they are sums, and nothing in a run reads them (the
usage view and the integrity check read them between steps). Any other case calls the reference's method, which
does what it did (nothing is touched before the check fails); so does a pool that tells discards (an event a
freed block) and a run whose window and state move at the same end (``_release``). Off: ``_take_ends``' loop
(tests/test_vllm_steady_ends_property.py holds the two equal).
"""

from __future__ import annotations

from typing import Any

from sim.cache.blocks.boundary_frees import RunFrees
from sim.cache.blocks.boundary_hashes import RunHashes
from sim.cache.blocks.request import BlockRequest
from sim.models import MAMBA, SWA

STEADY_ENDS = True


def takes(pool: Any, window_at: int, state_at: int) -> bool:
    """The loop applies: no discard told a block, and the window and the state never move at one end."""
    return STEADY_ENDS and not pool._discarded and window_at != state_at


def take_ends(
    manager: Any, req: BlockRequest, ends: list[int], lag: int, frees: RunFrees, hashes: RunHashes
) -> None:
    """``_take_ends``' loop over ``ends``, its frees and hashes made (and finished by the caller)."""
    B, pool, tables = manager.layout.block_size, manager.pool, req.tables
    window_at = (lag + manager.window - 1) % B if manager.has_swa else -1
    state_at = (lag + 1) % B if manager.has_mamba else -1
    alloc_at, hash_at = 1 % B, (lag - 1) % B
    head, key_at, num_groups = pool._head, pool.key_at, len(tables)
    num_taken = num_windows = num_states = 0
    for end in ends:
        residue, processed = end % B, end - lag
        if residue == window_at:
            if frees.at_end:
                frees.num_passed += 1
            elif _free_row(frees.swa_tables, head, key_at, (processed - frees.size + 1) // B - 1, True):
                num_windows += 1
            else:
                frees.window(processed)
        elif residue == state_at and processed > 1:
            if frees.num_steady and _free_row(frees.mamba_tables, head, key_at, (processed - 1) // B - 1):
                frees.num_steady, frees.last_below = frees.num_steady + 1, (processed - 1) // B - 1
                num_states += 1
            else:
                frees.states(processed)
        if residue == alloc_at:
            if len(head) >= num_groups:
                _take_top(head, tables, num_groups)
                num_taken += 1
            else:
                for table, block in zip(tables, pool.get_block_per_group(), strict=True):
                    table.append(block)
        if residue == hash_at:
            hashes.hash_block((processed + 1) // B - 1)
    _settle_held(
        pool,
        num_taken,
        [(SWA, num_windows * len(frees.swa_tables)), (MAMBA, num_states * len(frees.mamba_tables))],
    )


def _settle_held(pool: Any, num_taken: int, freed: list[tuple[str, int]]) -> None:
    """The held counts of ``take_ends``' allocations (a block per group each) and of its rows freed."""
    held = pool.held
    for kind, num_groups in pool._kind_counts:
        held[kind] += num_groups * num_taken
    for kind, num_freed in freed:
        if num_freed:
            held[kind] -= num_freed


def _free_row(
    tables: list[list[int | None]], head: list[int], key_at: list[Any], index: int, below_gone: bool = False
) -> bool:
    """A row freed as ``free_each`` frees unhashed blocks, onto the head in order, where every table holds an
    unhashed block at ``index`` (``below_gone``: and none at ``index - 1``, the window's test); else False, nothing
    done (the reference's method then takes the step)."""
    if below_gone and index <= 0:
        return False
    row: list[int] = []
    for table in tables:
        if index >= len(table) or (below_gone and table[index - 1] is not None):
            return False
        block = table[index]
        if block is None or key_at[block] is not None:
            return False
        row.append(block)
    for table in tables:
        table[index] = None
    head.extend(row)
    return True


def _take_top(head: list[int], tables: list[list[int | None]], count: int) -> None:
    """``get_block_per_group``'s blocks off the head's top (its last block first), a block a table."""
    top = len(head) - 1
    for index in range(count):
        tables[index].append(head[top - index])
    del head[top + 1 - count :]
