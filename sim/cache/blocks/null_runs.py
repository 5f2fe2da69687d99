"""A SWA or Mamba table's nulls counted, not filtered (``COUNTED``): the held blocks found without a call a slot.

A Mamba group's table is nearly all nulls: each prefill chunk appends hundreds of them before its one or two
state blocks (``steps.blocks_to_allocate``), and a SWA group's is nulls below its window once the window has
moved. At 4,000 Mooncake requests ``release_states`` read 13.3 M slots to free 48,396 blocks, every one of them
the block at the group's ``retired`` index, and a finish's frees read 23.9 M slots of SWA and Mamba tables
for 423,148 blocks. The reference filters each slot (``filter(None, reversed(...))``: an iterator step and a
truth test a slot) and writes a null over each null again; here the nulls are counted in one C pass
(``list.count`` answers a null by identity) and, where they are where the usual case has them, the held
blocks are sliced out and only they are nulled. Anything else takes the reference's path.
Off: the reference (tests/test_vllm_null_runs_property.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Iterable

COUNTED = True


def states_below(table: list[int | None], retired: int, last: int) -> list[int]:
    """The held blocks of ``table[retired:last]``, highest first, each slot of it then null."""
    if COUNTED:
        run = table[retired:last]
        num_null = run.count(None)
        if num_null == len(run):
            return []  # every slot null already
        if num_null == len(run) - 1 and run[0] is not None:  # the usual: the state at ``retired`` alone
            table[retired] = None
            return [run[0]]
    freed = list(filter(None, reversed(table[retired:last])))  # highest first; a held block is never 0
    table[retired:last] = [None] * (last - retired)
    return freed


def held_tail_first(table: list[int | None], has_nulls: bool) -> Iterable[int | None]:
    """A finishing request's ``table``, tail first, for ``free_blocks``: its held blocks alone where its
    nulls (``has_nulls``: a SWA or Mamba table) all lie below them, else the whole table reversed."""
    if COUNTED and has_nulls:
        num_null = table.count(None)
        held = table[num_null:]
        if num_null and held.count(None) == 0:  # the nulls are its first ``num_null`` slots
            held.reverse()
            return held
    return reversed(table)


def any_held(table: list[int | None], first: int, end: int) -> bool:
    """Whether ``table[first:end]`` may hold a block: False where it holds none (a Mamba group's chunk below its
    state: no key to tell skipped); True where its first slot is held (a SWA group's chunk: nothing counted),
    and off (the caller works its keys out, the reference)."""
    if not COUNTED or (first < len(table) and table[first] is not None):
        return True  # past the table's end: an empty range, holding none
    run = table[first:end]
    return run.count(None) != len(run)
