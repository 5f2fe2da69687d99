"""SGLang drops a request whose first chunk gets no page (``_select_prefill_admission`` returns OTHER) before
``prepare_for_extend`` takes its slots; only the MAMBA slot its match took to copy the hit's state
(``finalize_match_result_in_cache``) was evicted for, and it is freed again. Boundary seed 2007 (mixed chunks,
page 128, chunk 128): at step 191 L0's decode row leaves 127 tokens of the pass's chunk, L2's first chunk gets
no page, and SGLang 0.5.23's MAMBA pool is (1 free, 72 tree-held), as recorded through the step driver
(tests/conformance runs SGLang again). Admitting first evicted three states for L2's slots: (3, 70)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from conformance.generate_boundary import generate_boundary

# SGLang's steps 189-192 of boundary seed 2007 without pressure: (at, batch, (FULL, MAMBA) pools)
RECORDED = [
    (189, (("L0", 128, True),), ((972, 189), (0, 73))),
    (190, (("L0", 8, True),), ((971, 190), (0, 73))),
    (191, (("L0", 1, False),), ((971, 190), (1, 72))),
    (192, (("L0", 1, False),), ((971, 190), (1, 72))),
]


def test_a_request_whose_first_chunk_gets_no_page_takes_no_slot():
    scenario = generate_boundary("sglang", 2007, False)
    assert scenario.config.mixed_chunk and scenario.config.page_size == 128
    run = simulated_steps(scenario, "sglang")
    assert [(s.at, s.batch, s.pools) for s in run.steps[189:193]] == RECORDED
