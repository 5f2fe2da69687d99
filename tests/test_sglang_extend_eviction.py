"""Before an extend SGLang evicts for the batch's chunks and, where a page is longer than a token, a page per
request more (``alloc_paged_token_slots_extend``); with page size 1 ``alloc_token_slots`` asks only the
chunks' tokens, so a pool that holds them exactly evicts nothing. Pinned with SGLang 0.5.23's answer on the
boundary scenario that found it (seed 5 under pressure before the family drew the Mamba chunk; its trace is
kept here as it was drawn)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from conformance.scenario import EngineConfig, Scenario, trace_lines

# (id, arrival step, prompt parts, output length)
_REQUESTS = [
    ("e0", 0, [("x0", 192)], 83), ("e0d0", 2, [("x0", 63), ("e0d0", 192)], 17), ("e0d1", 42, [("x0", 192)], 21),
    ("e0d2", 42, [("x0", 63)], 6), ("e1", 82, [("x1", 65)], 48), ("e1d0", 482, [("x1", 65), ("e1d0", 1)], 1),
    ("e1d1", 483, [("x1", 1)], 105), ("e1d2", 485, [("x1", 65), ("e1d2", 1)], 16), ("e1d3", 525, [("x1", 64)], 19),
    ("e2", 526, [("x2", 383)], 62), ("e2d0", 528, [("x2", 65), ("e2d0", 1)], 1), ("e2d1", 530, [("x2", 128)], 7),
]


def _exact_pool() -> Scenario:
    requests = [
        {"id": rid, "arrival": float(at), "prompt": [{"ref": ref, "len": n} for ref, n in parts], "output_len": out}
        for rid, at, parts, out in _REQUESTS
    ]
    config = EngineConfig("full+mamba", 1, 0, 128, 64, 8192, 128, full_tokens=447, swa_tokens=0, mamba_states=8)
    return Scenario("sglang-boundary-5-pressure-edges", "sglang", 5, "boundary-edges", True, config,
                    trace_lines(requests))


def test_a_page_one_extend_that_fills_the_pool_exactly_evicts_nothing():
    # FULL + MAMBA, page 1, FULL pool 447: at step 83 e0's outputs are released and e0d0's 255-token prefill
    # takes the 255 free tokens; SGLang keeps e0's 192 prompt tokens and its MAMBA state in the tree
    run = simulated_steps(_exact_pool(), "sglang")
    (step,) = [step for step in run.steps if step.at == 83]
    assert step.batch == (("e0d0", 255, True),)
    assert step.pools == ((0, 192), (4, 1))
