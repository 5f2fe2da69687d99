"""SGLang 0.5.23's prefill and decode budget arithmetic (sim/cache/engines/sglang_budget.py), on numbers derived
by hand from SGLang's functions; the first cases are the ones SGLang itself logged for pressure seed 17."""
from __future__ import annotations

from sim.cache.engines.sglang_budget import (
    CLIP_MAX_NEW_TOKENS,
    PrefillVerdict,
    available_chunk_tokens,
    check_prefill,
    decode_tokens_needed,
    estimate_swa_kv_tokens,
    new_request_total_tokens,
    running_decode_offset,
    swa_chunk_cap,
)


def test_estimate_swa_kv_tokens():
    # estimate_swa_kv_tokens: max(min(extend, chunk) - W, 0) + min(extend + max_new, W) + page
    assert estimate_swa_kv_tokens(144, 2, window=256, page=16, chunk_limit=64) == 0 + 146 + 16
    assert estimate_swa_kv_tokens(2192, 7, window=256, page=16, chunk_limit=64) == 0 + 256 + 16
    assert estimate_swa_kv_tokens(1000, 10, window=256, page=16, chunk_limit=512) == 256 + 256 + 16
    assert estimate_swa_kv_tokens(600, 10, window=256, page=16, chunk_limit=None) == 344 + 256 + 16
    assert estimate_swa_kv_tokens(96, 500, window=256, page=32, chunk_limit=64) == 0 + 256 + 32


def test_new_request_total_tokens_adds_the_clipped_decode_and_a_page():
    # PrefillAdder.add_one_req: extend + min(max_new, CLIP) + per_req_token_overhead (a page)
    assert new_request_total_tokens(140, 2, page=16) == 158
    assert new_request_total_tokens(1182, 89, page=16) == 1287
    assert new_request_total_tokens(10, 10_000, page=64) == 10 + CLIP_MAX_NEW_TOKENS + 64


def test_check_prefill_full_needs_strictly_less_than_remaining():
    # PrefillBudget.check_prefill: total_tokens < remaining_total, or no
    common = dict(extend_len=100, max_new_tokens=10, remaining_swa=None, swa_pool_tokens=0, window=0, page=16,
                  chunk_limit=64)
    assert check_prefill(total_tokens=126, remaining_total=127, **common) == PrefillVerdict(True, 64)
    assert check_prefill(total_tokens=126, remaining_total=126, **common) == PrefillVerdict(False, None)


def test_check_prefill_a_locked_window_makes_an_idle_pool_wait():
    # seed 17's t1: 140 tokens to extend (144 paged), 2 to decode, W 256, a 368-token SWA pool of which the
    # matched window keeps 272 locked: the estimate 162 is not below the 96 left, and 162 < 368 is no permanent
    # shortfall (swa_never_fits), so SGLang waits
    verdict = check_prefill(extend_len=140, max_new_tokens=2, total_tokens=158, remaining_total=1904, remaining_swa=96,
                            swa_pool_tokens=368, window=256, page=16, chunk_limit=64)
    assert verdict == PrefillVerdict(False, None)
    fits = check_prefill(extend_len=1182, max_new_tokens=89, total_tokens=1287, remaining_total=3072,
                         remaining_swa=368, swa_pool_tokens=368, window=256, page=16, chunk_limit=64)
    assert fits == PrefillVerdict(True, 64)  # 272 < 368


def test_check_prefill_caps_the_chunk_of_a_request_that_never_fits_the_swa_pool():
    # estimate 528 >= a 300-token pool: swa_never_fits, so _chunk_cap = floor_16(remaining - (min(10, W) + 16))
    common = dict(extend_len=1000, max_new_tokens=10, total_tokens=1026, remaining_total=5000, swa_pool_tokens=300,
                  window=256, page=16, chunk_limit=512)
    assert check_prefill(remaining_swa=300, **common) == PrefillVerdict(True, 272)
    assert check_prefill(remaining_swa=100, **common) == PrefillVerdict(True, 64)
    assert check_prefill(remaining_swa=20, **common) == PrefillVerdict(False, None)  # the cap is 0
    assert check_prefill(**{**common, "chunk_limit": None}, remaining_swa=300) == PrefillVerdict(False, None)


def test_check_prefill_a_transient_swa_shortfall_waits():
    # the same request against a 1000-token pool: 528 < 1000, so a shortfall now is only transient
    verdict = check_prefill(extend_len=1000, max_new_tokens=10, total_tokens=1026, remaining_total=5000,
                            remaining_swa=300, swa_pool_tokens=1000, window=256, page=16, chunk_limit=512)
    assert verdict == PrefillVerdict(False, None)


def test_swa_chunk_cap():
    # SWAPrefillBudget._chunk_cap: headroom estimate_swa_kv_tokens(0, max_new) = min(max_new, W) + page
    assert swa_chunk_cap(300, 10, window=256, page=16) == 272
    assert swa_chunk_cap(300, 1000, window=256, page=16) == 16  # 300 - 272 = 28, floored
    assert swa_chunk_cap(200, 1000, window=256, page=16) == 0


def test_available_chunk_tokens():
    # SWAPrefillBudget.available_chunk_tokens: min(limit, remaining_total, remaining_swa - page), None if <= 0;
    # seed 17 logged (64, 896, 112) -> 64
    assert available_chunk_tokens(64, 896, 112, page=16) == 64
    assert available_chunk_tokens(64, 3008, 48, page=16) == 32
    assert available_chunk_tokens(64, 3008, 16, page=16) is None
    assert available_chunk_tokens(64, 40, 1000, page=16) == 40
    # PrefillBudget (FULL alone): a continuation with nothing remaining still takes its whole limit
    assert available_chunk_tokens(64, 0, None, page=16) == 64
    assert available_chunk_tokens(64, 10, None, page=16) == 10


def test_running_decode_offset_clips_each_request():
    # PrefillAdder.__init__: sum of min(max_new - len(output_ids), CLIP) at ratio 1 (ignore_eos)
    assert running_decode_offset([5000, 10, -3]) == CLIP_MAX_NEW_TOKENS + 10
    assert running_decode_offset([]) == 0


def test_decode_needs_a_page_only_where_the_token_starts_one():
    # new_tokens_required_next_decode: a page when kv_committed_len % page == 0
    assert decode_tokens_needed(2096, page=16) == 16
    assert decode_tokens_needed(2097, page=16) == 0
    assert decode_tokens_needed(5, page=1) == 1
