"""Pools under pressure: eviction frees the shortfall, LRU first, never a locked node; a request that
cannot fit is refused, not crashed."""
from __future__ import annotations

from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes
from sim.cache.solo_run import run_alone
from tests.cache_helpers import hybrid_model, manager, out, seq

FULL_ONLY = hybrid_model(swa=False, mamba=False)


def filled(num_requests=8):
    mgr = manager("sglang", FULL_ONLY, PoolSizes(40, 0, 0), page_size=4, track_interval=4)
    for i in range(num_requests):
        run_alone(mgr, f"r{i}", seq((f"p{i}", 16)) + out(f"r{i}", 1), 16, 1, 64)
    return mgr


def cached(mgr, i):
    tokens = seq((f"p{i}", 16), ("next", 4))
    return mgr.match(tokens, len(tokens)).cached_len


def test_eviction_frees_exactly_the_shortfall_lru_first():
    mgr = filled()
    assert mgr.pools["full"].num_free == 8
    mgr.admit("big", seq(("big", 44)) + out("big", 1), 44)
    plan = mgr.prepare_prefill("big", 44, 0)
    assert not isinstance(plan, Refusal)
    # SGLang evicts for the chunk's 11 pages plus one (alloc_paged_token_slots_extend's page of slack):
    # a 4-page shortfall, one 4-page leaf
    assert mgr.pools["full"].num_free == 1
    assert cached(mgr, 0) == 0
    assert all(cached(mgr, i) == 16 for i in range(1, 8))
    mgr.check_integrity()


def test_locked_path_survives_pressure():
    mgr = filled()
    mgr.admit("reader", seq(("p0", 16), ("q", 8)) + out("reader", 1), 24)  # locks r0's path
    mgr.admit("big", seq(("big", 48)) + out("big", 1), 48)
    assert not isinstance(mgr.prepare_prefill("big", 48, 0), Refusal)
    assert cached(mgr, 0) == 16 and cached(mgr, 1) == 0  # r1 was the least recent unlocked leaf
    mgr.check_integrity()


def test_request_larger_than_pool_is_refused_cleanly():
    mgr = filled()
    refusal = mgr.admit("huge", seq(("huge", 400)) + out("huge", 1), 400)
    # PrefillAdder.add_one_req: 400 + 0 + a page against 8 free + 32 evictable pages of 4 tokens (the one output
    # is clipped to 0 new tokens: init_req_max_new_tokens leaves none beside a prompt the pool cannot hold)
    assert isinstance(refusal, Refusal) and refusal.pool == "FULL" and refusal.needed == 404
    assert refusal.available == 160 and "NO_TOKEN" in str(refusal)
    assert "huge" not in mgr.requests
    mgr.check_integrity()
    assert mgr.pools["full"].num_free == 8  # the budget evicts nothing


def test_swa_pressure_tombstones_before_deleting_locked_paths():
    model = hybrid_model(mamba=False, window=8)
    mgr = manager("sglang-retain", model, PoolSizes(200, 12, 0), page_size=4, track_interval=4)
    # two outputs: a request done at its prompt is not committed after its prefill (SGLang's release path)
    run_alone(mgr, "a", seq(("a", 32)) + out("a", 2), 32, 2, 64)
    before = mgr.tree.num_swa_pages
    assert before == 3  # the prefill commit already freed below floor4(31 - 8) = 20
    mgr.admit("b", seq(("b", 36)) + out("b", 1), 36)
    assert not isinstance(mgr.prepare_prefill("b", 36, 0), Refusal)  # 9 pages and SGLang's one of slack, 9 free
    assert mgr.tree.num_swa_pages == 2  # one live node of a's tombstoned: the shortfall, no more
    assert mgr.tree.num_full_pages == 8  # ... and its FULL KV stayed
    mgr.check_integrity()


def test_mamba_states_are_evicted_for_a_new_request():
    mgr = manager("sglang", hybrid_model(window=8, mamba_chunk=4), PoolSizes(400, 400, 3),
                  page_size=4, track_interval=8)
    for i in range(4):
        run_alone(mgr, f"r{i}", seq((f"p{i}", 16)) + out(f"r{i}", 1), 16, 1, 64)
        mgr.check_integrity()
    assert mgr.tree.num_states <= 3
    assert cached(mgr, 3) == 16 and cached(mgr, 0) == 0
