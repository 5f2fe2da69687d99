"""vLLM's rules one by one (docs/vllm-rules.md sections 4-6): the hit fixed point and the junction, the
align-mode chunk ends, and which blocks get a hash."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.chunks import aligned_end, exports_checkpoint
from sim.cache.blocks.hit import answer, longest_hit
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.retention import reachable, reachable_indices

B = 16


def cached_pool(layout: Layout, cached: dict[str, set[int]]) -> BlockPool:
    """A pool where block index i of the chain (key i + 1) is cached in every group of each kind listed."""
    pool = BlockPool(1000, layout.group_kinds)
    for group, kind in enumerate(layout.group_kinds):
        for index in sorted(cached.get(kind, ())):
            pool.cache(pool.get_new_blocks(1, group)[0], (index + 1, group))
    return pool


CHAIN = list(range(1, 40))  # block i's key is i + 1
THREE = Layout(B, ("full", "swa", "mamba"), 0, 64, 0)  # need = cdiv(63, 16) = 4


def test_each_kind_answers_the_largest_point_it_accepts():
    pool = cached_pool(THREE, {"full": set(range(10)), "swa": {3, 4, 5, 6, 8}, "mamba": {5, 8}})
    assert answer(THREE, pool, CHAIN, "full", 1000) == 160  # the leading run
    assert answer(THREE, pool, CHAIN, "full", 100) == 96  # at most floor(h / B) blocks
    assert answer(THREE, pool, CHAIN, "swa", 160) == 112  # blocks 3..6: the run of need ending at block 6
    assert answer(THREE, pool, CHAIN, "mamba", 160) == 144  # the state after block 8
    assert answer(THREE, pool, CHAIN, "mamba", 143) == 96


def test_swa_without_a_full_window_run_takes_the_run_from_block_zero():
    pool = cached_pool(THREE, {"swa": {0, 1, 5}})
    assert answer(THREE, pool, CHAIN, "swa", 200) == 32


def test_the_fixed_point_repeats_until_it_stops_shrinking_and_the_junction_is_fulls_answer():
    pool = cached_pool(THREE, {"full": set(range(10)), "swa": {3, 4, 5, 6, 8}, "mamba": {5, 8}})
    # FULL 160 -> SWA 112 -> Mamba 96 -> SWA at 96: blocks 2..5 lack 2 -> 0 ... until stable
    hit = longest_hit(THREE, pool, CHAIN, 170)
    assert hit.full_tokens == 160 and hit.junction == 160
    assert hit.tokens == answer(THREE, pool, CHAIN, "swa", hit.tokens) == answer(THREE, pool, CHAIN, "mamba",
                                                                                 hit.tokens)
    assert hit.tokens == 0  # no point below 112 has both a window of 4 and a state
    both = cached_pool(THREE, {"full": set(range(10)), "swa": set(range(2, 9)), "mamba": {5}})
    assert longest_hit(THREE, both, CHAIN, 170) == (96, 160, 160)


def test_the_cap_is_n_minus_one_and_a_full_match_leaves_no_junction():
    layout = Layout(B, ("full", "mamba"), 0, 0, 0)
    pool = cached_pool(layout, {"full": set(range(10)), "mamba": set(range(10))})
    assert longest_hit(layout, pool, CHAIN, 161) == (160, 160, 0)
    assert longest_hit(layout, pool, CHAIN, 160) == (144, 144, 0)  # N = 10 blocks: the last token recomputed
    assert longest_hit(layout, pool, CHAIN, 16) == (0, 0, 0)  # N <= B never hits


def test_groups_of_one_kind_are_looked_up_together():
    layout = Layout(B, ("mamba", "mamba", "full"), 0, 0, 0)
    pool = cached_pool(layout, {"full": set(range(10))})
    pool.cache(pool.get_new_blocks(1, 0)[0], (5, 0))  # state after block 4, in the first Mamba group only
    assert answer(layout, pool, CHAIN, "mamba", 160) == 0
    pool.cache(pool.get_new_blocks(1, 1)[0], (5, 1))
    assert answer(layout, pool, CHAIN, "mamba", 160) == 80


def chunk_ends(n: int, budget: int = 2048, junction: int = 0, internal: bool = False) -> list[int]:
    """A cold prompt's chunk ends, one request at a time, B 528 (vllm-rules.md section 6)."""
    ends, start = [], 0
    while start < n:
        start = aligned_end(528, start, start + min(n - start, budget), n, junction, budget, internal)
        ends.append(start)
    return ends


def test_align_mode_chunk_ends():
    assert chunk_ends(1000) == [528, 1000]  # a cold prompt: up to its last boundary, then the rest
    assert chunk_ends(2200) == [1584, 2112, 2200]  # floored to whole blocks, then the last boundary
    assert chunk_ends(3000, budget=8192) == [2640, 3000]
    assert chunk_ends(3000, budget=8192, junction=2112) == [2112, 2640, 3000]  # the junction's state
    assert chunk_ends(3000, budget=8192, junction=2200) == [2112, 2640, 3000]  # block-floored
    assert chunk_ends(1000, internal=True) == [1000]  # an internal checkpoint: no split
    assert aligned_end(528, 0, 256, 2200, 0, 256, False) == 256  # a block wider than the budget: sub-block
    assert aligned_end(528, 256, 512, 2200, 0, 256, False) == 512
    assert aligned_end(528, 512, 768, 2200, 0, 256, False) == 528  # and it realigns at the boundary


def test_internal_checkpoints_only_in_the_last_chunk_under_retention_zero():
    assert exports_checkpoint(64, 0, 1000, 1000, every_chunk=False)  # the state at 960
    assert not exports_checkpoint(64, 0, 512, 1000, every_chunk=False)
    assert exports_checkpoint(64, 0, 512, 1000, every_chunk=True)  # R != 0: every chunk longer than a block
    assert not exports_checkpoint(64, 0, 64, 64, every_chunk=True)  # no boundary a block past the start


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(("full", "swa", "mamba")), st.integers(0, 40), st.integers(0, 40),
       st.sampled_from((None, 0, 16, 32, 64, 128)), st.integers(0, 6), st.integers(0, 700), st.integers(0, 700))
def test_reachable_indices_are_the_mask(kind, first, length, retention, need, prompt_end, junction):
    boundaries = (prompt_end, junction // B * B)
    expected = [i for i in range(first, first + length) if reachable(kind, i, retention, B, need, boundaries)]
    assert list(reachable_indices(kind, first, first + length, retention, B, need, boundaries)) == expected


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(0, 30)), st.integers(0, 40), st.integers(2, 80))
def test_the_swa_answer_is_the_window_rule(cached, limit_blocks, window):
    """SWA accepts x iff blocks [max(0, x/B - need), x/B) are all cached; the answer is the largest such x
    (a window of one token needs no block, and vLLM's search then takes the last cached block: left out)."""
    layout = Layout(B, ("full", "swa"), 0, window, 0)
    pool = cached_pool(layout, {"swa": cached})
    need = layout.swa_need
    accepted = [x for x in range(limit_blocks + 1)
                if all(i in cached for i in range(max(0, x - need), x))]
    assert answer(layout, pool, CHAIN, "swa", limit_blocks * B) == max(accepted) * B
