"""A step's nothing-to-do tests taken once per step (``sim/cache/blocks/steps.py``) against the per-group forms
they shortcut: ``release_skipped`` testing each group before its call against calling ``release_window`` /
``release_states`` for every group; ``blocks_to_allocate``'s zero plan and ``cache_blocks``' full-block test
on one block size against the loop over the groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks import steps
from sim.cache.blocks.hit import Hit
from sim.cache.blocks.keys import KeyChain
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.results import MatchResult
from sim.models import MAMBA, SWA
from sim.tokens import TokenSeq

KINDS = ("swa", "swa", "full", "mamba", "mamba")
LAYOUT = Layout(4, KINDS, 0, 10, 0)  # blocks of 4 tokens, a window of 10


def _request(pool: BlockPool, shapes: list[list[bool]], retired: list[int]) -> BlockRequest:
    tables: list[list[int | None]] = []
    for group, live in enumerate(shapes):
        blocks = iter(pool.get_new_blocks(sum(live), group))
        tables.append([next(blocks) if held else None for held in live])
    num_cached = [0] * len(KINDS)
    return BlockRequest(
        "r",
        TokenSeq([]),
        1,
        MatchResult(0, 0, None),
        Hit(0, 0, 0),
        KeyChain(),
        tables,
        num_cached,
        [min(r, len(t)) for r, t in zip(retired, tables, strict=True)],
    )


def _every_group(pool: BlockPool, req: BlockRequest, processed: int, early: bool) -> None:
    """``release_skipped`` as it was: each group's release called, its own test deciding."""
    for group, kind in enumerate(LAYOUT.group_kinds):
        if kind == SWA:
            steps.release_window(LAYOUT, pool, req.tables[group], group, processed, int(early))
        elif kind == MAMBA and processed > 1:
            steps.release_states(LAYOUT, pool, req, group, processed)


shape = st.lists(st.booleans(), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(shape, min_size=5, max_size=5),
    st.lists(st.integers(0, 12), min_size=5, max_size=5),
    st.integers(0, 60),
    st.booleans(),
)
def test_release_tested_per_step_matches_every_group_called(shapes, retired, processed, early):
    pools = BlockPool(80, KINDS), BlockPool(80, KINDS)
    fast, plain = _request(pools[0], shapes, retired), _request(pools[1], shapes, retired)
    steps.release_skipped(LAYOUT, pools[0], fast, processed, early)
    _every_group(pools[1], plain, processed, early)
    assert (fast.tables, fast.retired) == (plain.tables, plain.retired)
    assert pools[0].queue() == pools[1].queue() and pools[0].ref_counts() == pools[1].ref_counts()


def _plan_per_group(tables: list[list[int | None]], end: int, checkpoint: bool) -> list[tuple[int, int]]:
    plan = []
    for kind, table in zip(KINDS, tables, strict=True):
        needed, have = -(-end // 4), len(table)
        if kind != MAMBA:
            plan.append((0, max(0, needed - have)))
        elif needed <= have and not checkpoint:
            plan.append((0, 0))
        else:
            nulls = max(0, needed - 1 - checkpoint - have)
            plan.append((nulls, max(0, needed - have - nulls)))
    return plan


@settings(max_examples=300, deadline=None)
@given(
    st.lists(shape, min_size=5, max_size=5),
    st.integers(1, 60),
    st.booleans(),
    st.lists(st.integers(0, 15), min_size=5, max_size=5),
)
def test_one_block_size_tests_match_the_per_group_loops(shapes, end, checkpoint, num_cached):
    assert LAYOUT.uniform_block == 4
    tables = [[None] * len(live) for live in shapes]
    assert steps.blocks_to_allocate(LAYOUT, tables, end, checkpoint) == _plan_per_group(
        tables, end, checkpoint
    )
    pool = BlockPool(80, KINDS)
    req = _request(pool, shapes, [0] * 5)
    req.num_cached = list(num_cached)
    cacheable = end // 4 * 4
    nothing_full = all(cacheable // 4 <= num for num in num_cached)
    before = list(req.num_cached)
    if nothing_full:  # the test returns before the keys are asked for (an empty token sequence has none)
        steps.cache_blocks(LAYOUT, pool, None, req, end, checkpoint, None)  # type: ignore[arg-type]
        assert req.num_cached == before and not pool.key_of
    else:
        try:
            steps.cache_blocks(LAYOUT, pool, None, req, end, checkpoint, None)  # type: ignore[arg-type]
        except AttributeError:  # went on to build the keys: it did not return early
            return
        raise AssertionError("cache_blocks returned early with a full block to hash")


def test_two_block_sizes_have_no_uniform_block():
    assert Layout(8, ("swa", "full"), 0, 10, 0, (("swa", 4),)).uniform_block == 0
