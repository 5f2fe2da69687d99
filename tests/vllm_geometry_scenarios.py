"""A hand-made scenario on vLLM 0.33.0's block sizes for a model whose layer types store different bytes a
token (gemma-4: its SWA layers twice its FULL layers), with vLLM's own answer (tests/conformance/test_vllm_engine.py
runs vLLM again; tests/test_vllm_layout.py checks that simulate answers the same without vLLM installed).

``unify_kv_cache_spec_page_size`` makes every page the largest: the FULL group's blocks hold 32 tokens beside
the SWA group's 16, and a hit must end on the scheduler block, their lcm 32
(``HybridKVCacheCoordinator.find_longest_cache_hit``'s alignment). b shares a's 1010 tokens: FULL has 31 whole
blocks (992), so the hit is 992; with 16-token blocks everywhere it was 1008.
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, one_at_a_time, trace_lines


def unequal_pages() -> Scenario:
    requests = [
        {"id": "a", "prompt": [{"ref": "x", "len": 1010}], "output_len": 2},
        {"id": "b", "prompt": [{"ref": "x", "len": 1010}, {"ref": "y", "len": 10}], "output_len": 2},
    ]
    config = EngineConfig(
        "full+swa",
        16,
        64,
        256,
        64,
        8192,
        128,
        full_tokens=0,
        swa_tokens=0,
        mamba_states=0,
        num_blocks=400,
        retention_interval=0,
        max_model_len=2048,
        full_kv_heads=1,
        swa_kv_heads=2,
    )
    return Scenario("unequal-pages", "vllm", 0, "hand", False, config, trace_lines(one_at_a_time(requests)))


UNEQUAL_PAGES = [0, 992]
