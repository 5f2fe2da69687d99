"""Which blocks a step hashes when the groups' blocks differ (sim/cache/blocks/steps.py ``cache_blocks``):
vLLM 0.33.0 hashes only the tokens below the last scheduler block (``HybridKVCacheCoordinator.
get_num_cacheable_tokens`` rounds down to it, as a hit can only end there). Found by the spaced conformance
scenario vllm seed 19 with pressure: a SWA block past the last 32-token boundary hashed by us and not by vLLM
changed which block the next request evicted."""

from __future__ import annotations

from sim.cache.blocks.hit import Hit
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.cache.blocks.layout import layout_for
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.steps import allocate, blocks_to_allocate, cache_blocks
from sim.cache.results import MatchResult
from sim.models import FULL, SWA, get_model
from sim.tokens import TokenSeq


def _hashed_after(end: int) -> dict[str, int]:
    # gemma-4: FULL blocks of 32 tokens, SWA blocks of 16; the scheduler block is 32
    layout = layout_for(get_model("gemma-4-26b-a4b"), 16, 1024, True)
    assert (layout.block_of(FULL), layout.block_of(SWA), layout.block_size) == (32, 16, 32)
    pool = BlockPool(200, layout.group_kinds)
    groups = len(layout.group_kinds)
    req = BlockRequest("a", TokenSeq.of("x", 100), 100, MatchResult(0, 0, None), Hit(0, 0, 0), KeyChain(),
                       [[] for _ in range(groups)], [0] * groups, [0] * groups, num_prompt_tokens=100)
    allocate(pool, req, blocks_to_allocate(layout, req.tables, end, checkpoint=False))
    cache_blocks(layout, pool, BlockKeys(layout.hash_block), req, end, checkpoint=False, retention=None)
    hashed = {FULL: 0, SWA: 0}
    for group, kind in enumerate(layout.group_kinds):
        hashed[kind] = max(hashed[kind], sum(block in pool.key_of for block in req.tables[group]))
    return hashed


def test_blocks_past_the_last_scheduler_block_stay_unhashed():
    # 48 tokens: SWA's third block (32..47) is full, but 48 rounds down to 32: vLLM hashes two SWA blocks
    assert _hashed_after(48) == {FULL: 1, SWA: 2}
    assert _hashed_after(64) == {FULL: 2, SWA: 4}
    assert _hashed_after(31) == {FULL: 0, SWA: 0}
