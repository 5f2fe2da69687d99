"""Before an extend SGLang evicts for the batch's chunks and, where a page is longer than a token, a page per
request more (``alloc_paged_token_slots_extend``); with page size 1 ``alloc_token_slots`` asks only the
chunks' tokens, so a pool that holds them exactly evicts nothing. Pinned with SGLang 0.5.23's answer on the
boundary scenario that found it (conformance/generate_boundary.py; tests/conformance runs SGLang again)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from conformance.generate_boundary import generate_boundary


def test_a_page_one_extend_that_fills_the_pool_exactly_evicts_nothing():
    # FULL + MAMBA, page 1, FULL pool 447: at step 83 e0's outputs are released and e0d0's 255-token prefill
    # takes the 255 free tokens; SGLang keeps e0's 192 prompt tokens and its MAMBA state in the tree
    run = simulated_steps(generate_boundary("sglang", 5, pressure=True), "sglang")
    (step,) = [step for step in run.steps if step.at == 83]
    assert step.batch == (("e0d0", 255, True),)
    assert step.pools == ((0, 192), (4, 1))
