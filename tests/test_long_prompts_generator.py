"""The one-at-a-time family's long prompts (conformance/generate_long.py): a share of seeds 0-199 serves prompts
of 8k to 32k tokens on every engine and pressure, CI's 30 seeds hold some, no request passes 32,768 tokens,
and under pressure the FULL pool sits at the largest request's edge. Simulator side only; the engines' side
is tests/conformance/test_suite_agrees.py (CI) and `python cli.py conformance ENGINE --scenarios 200`."""

from __future__ import annotations

import pytest

from conformance.generate import generate
from conformance.generate_long import MAX_REQUEST_LEN, is_long
from sim.align import ceil_to


@pytest.mark.parametrize("pressure", [False, True])
@pytest.mark.parametrize("engine", ["sglang", "freetoken", "vllm"])
def test_long_seeds_reach_32k_tokens_within_the_limit(engine, pressure):
    seeds = [seed for seed in range(200) if is_long(engine, seed, pressure)]
    assert 10 <= len(seeds) <= 40 and any(seed < 30 for seed in seeds)  # CI's seeds hold some
    longest = 0
    for seed in seeds:
        scenario = generate(engine, seed, pressure)
        trace = scenario.trace()
        assert scenario.kind == "long" and 8_000 <= trace.prompt_len(trace.requests[0].id) <= 30_000
        assert all(trace.prompt_len(r.id) + r.output_len <= MAX_REQUEST_LEN for r in trace)
        assert len(trace) >= 3
        longest = max(longest, *(trace.prompt_len(r.id) for r in trace))
        if pressure and engine != "vllm":  # vLLM's one pool is sized by its own start-up check
            page = scenario.config.page_size
            need = max(ceil_to(trace.prompt_len(r.id) + r.output_len, page) for r in trace)
            assert need <= scenario.config.full_tokens <= need + 8 * page
    assert longest > 32_000


def test_the_other_seeds_draw_no_long_prompt():
    for seed in range(30):
        if not is_long("sglang", seed, True):
            trace = generate("sglang", seed, True).trace()
            assert max(trace.prompt_len(r.id) for r in trace) < 8_000
