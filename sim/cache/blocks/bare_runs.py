"""A request's kept-out FULL blocks left bare (``BARE_RUNS``): no per-block entry written for them while its table
holds them or its run waits in the free queue's tail; the request's notes (``req.kept_unkeyed``) and the run are
their record.

The reference writes each such block's entries five or six times: at ``lazy_keys.keep_out`` its key (the request's
``Unkeyed`` mark), group and kept-out mark, at ``tail_runs.free_own_run`` its count 0, at ``tail_runs.evict_runs``
its key None, count 1 and mark 0 again (at 4,000 Mooncake requests ~1.7 M blocks, ~12 M writes). Nobody reads
them in between: no hit finds a kept-out block (it is not in the map), its request frees it as a run without a
read, and its eviction as a run reads nothing. So the block stays as an unhashed block's entries are (key None,
count 1, mark 0: what the eviction leaves) from its allocation to its eviction. Where the reference would read
them, they are written first (``dress``): a request's free that makes no run (its FULL table's noted blocks not
one stretch, discards told), the first preemption (the running requests' notes, and every run in the tail
before it is made entries again). A FULL block is hashed once, fresh from the free queue (its group's
``num_cached`` passes it once), so ``keep_out``'s "none hashed yet" holds for it without a read. Off: the
reference (tests/test_vllm_bare_runs_property.py holds the two alike).
"""

from __future__ import annotations

from typing import Any

from sim.cache.blocks import by_id
from sim.cache.blocks.out_of_map import KEPT_OUT, Unkeyed
from sim.models import FULL

BARE_RUNS = True


def is_bare(pool: Any, group: int) -> bool:
    """``group``'s kept-out blocks are left bare in ``pool``."""
    return bool(pool.bare_kept_out) and pool.group_kinds[group] == FULL


def dress(pool: Any, req: Any, group: int = -1) -> None:
    """``req``'s bare blocks (of ``group``; -1: every group) given the entries the reference holds for them while
    held: its ``Unkeyed`` mark, their group, kept out (a FULL block is held by its request to its finish)."""
    if not pool.bare_kept_out:
        return
    for noted_group, blocks, _ in req.kept_unkeyed:
        if (group < 0 or noted_group == group) and pool.group_kinds[noted_group] == FULL:
            by_id.fill(pool.key_at, blocks, req.unkeyed)
            by_id.fill(pool.group_at, blocks, noted_group)
            by_id.fill(pool.private, blocks, KEPT_OUT)


def dress_runs(pool: Any) -> None:
    """Every run in the tail given the entries the reference holds for a freed kept-out block: an ``Unkeyed``
    mark (its finished request's: no check reads whose), its group, counted 0, kept out."""
    if not pool.bare_kept_out:
        return
    finished = Unkeyed()
    for _, run, group in pool._tail.runs:
        by_id.fill(pool.key_at, run, finished)
        by_id.fill(pool.group_at, run, group)
        by_id.fill(pool.count_at, run, 0)
        by_id.fill(pool.private, run, KEPT_OUT)


def run_blocks(pool: Any) -> dict[int, int]:
    """The bare blocks in the tail's runs, each with its group (for integrity checks and tests)."""
    if not pool.bare_kept_out:
        return {}
    return {block: group for _, run, group in pool._tail.runs for block in run}
