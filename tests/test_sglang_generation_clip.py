"""SGLang clips a request's generation at arrival (``Scheduler.init_req_max_new_tokens`` through
``BaseTokenToKVPoolAllocator.max_new_tokens_for_memory``) to what an empty FULL pool holds beside the paged
prompt, one page and one token. Pinned with SGLang 0.5.23's answers on boundary scenarios whose FULL pool
sits at a request's edge (conformance/generate_boundary.py; tests/conformance runs SGLang again)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from conformance.generate_boundary import generate_boundary
from sim.cache.engines.sglang_budget import max_new_tokens_for_memory


def test_the_clip_is_the_pool_less_the_paged_prompt_a_page_and_a_token():
    assert max_new_tokens_for_memory(515, 21, 576, 32) == 0  # 576 - 544 - 32 - 1 < 0
    assert max_new_tokens_for_memory(224, 104, 336, 16) == 95  # 336 - 224 - 16 - 1
    assert max_new_tokens_for_memory(100, 7, 4096, 16) == 7


def test_a_request_clipped_to_nothing_finishes_with_its_first_token():
    # page 128, FULL pool 640: e0 (385 prompt tokens, 20 asked) ends after its prefill at step 0, as in SGLang;
    # nothing decodes at step 1 (e0d1 waits for step 2 to arrive)
    run = simulated_steps(generate_boundary("sglang", 3, pressure=True), "sglang")
    assert run.requests["e0"].served and run.requests["e0"].finished_at == 1
    first_two = [(step.at, step.batch) for step in run.steps[:2]]
    assert first_two == [(0, (("e0", 385, True),)), (2, (("e0d1", 256, True),))]


def test_a_clipped_request_fits_where_the_unclipped_one_would_not():
    # page 16, FULL pool 336: e1d0 (224 + 104 asked) would need 344 tokens; clipped to 95 SGLang serves it
    run = simulated_steps(generate_boundary("sglang", 9, pressure=True), "sglang")
    assert run.requests["e1d0"].served and run.requests["e1d0"].finished_at == 496


def test_a_request_clipped_to_nothing_is_admitted_on_a_budget_of_no_decode():
    # page 1, FULL pool 323: e0d0 (321 prompt tokens, 192 cached) is clipped to 0 new tokens, so PrefillAdder
    # charges 129 + 0 + 1 < 131 free: SGLang admits it (it would not charge the one output token it generates)
    run = simulated_steps(generate_boundary("sglang", 21, pressure=True), "sglang")
    assert run.requests["e0d0"] == run.requests["e0d0"]._replace(
        cached_tokens=192, served=True, finished_at=403
    )
