"""The boundary family (conformance/generate_boundary.py), without an engine: pure, within its ranges, and it
draws what it is for: odd windows (W - 1 on the page grid), a prefill chunk exactly one Mamba grid long,
prompt lengths at the rules' boundaries +-1, identical prompts arriving in one step, pools at the edge."""

from __future__ import annotations

import pytest

from conformance.generate_boundary import CLIP_MAX_NEW_TOKENS, SHAPES, boundaries, generate_boundary
from conformance.generate_targeted import targeted_seeds
from conformance.scenario import arrival_steps

ENGINES = ("sglang", "freetoken", "vllm")


def _scenarios():
    """The drawn scenarios (the targeted seeds are built on purpose: tests/test_targeted_generator.py)."""
    return [
        generate_boundary(e, seed, seed % 2 == 1)
        for e in ENGINES
        for seed in range(40)
        if seed not in targeted_seeds(e)
    ]


def test_scenarios_are_pure_and_stay_in_their_ranges():
    shapes = set()
    for scenario in _scenarios():
        assert scenario == generate_boundary(scenario.engine, scenario.seed, scenario.pressure)
        trace = scenario.trace()
        assert 2 <= len(trace) <= 40
        steps = arrival_steps(scenario)
        assert steps == sorted(steps) and steps[0] >= 0
        assert all(trace.prompt_len(r.id) <= 32768 for r in trace)
        shapes.add(scenario.kind)
    assert shapes == {f"boundary-{shape}" for shape in SHAPES}


def test_the_rules_boundaries_are_drawn():
    scenarios = _scenarios()
    configs = [s.config for s in scenarios]
    odd = [c for c in configs if c.has_swa and c.page_size > 1 and (c.window - 1) % c.page_size == 0]
    assert len(odd) >= 5, "windows one more than a multiple of the page"
    grid_chunks = [
        c for c in configs if c.has_mamba and c.chunked_prefill_size == max(c.mamba_chunk, c.page_size)
    ]
    assert len(grid_chunks) >= 5, "a prefill chunk exactly one checkpoint grid long"
    assert {c.page_size for c in configs} >= {1, 16, 64, 128}
    on_edge = 0
    for scenario in scenarios:
        edges = set(boundaries(scenario.config))
        trace = scenario.trace()
        on_edge += sum(trace.prompt_len(r.id) in edges for r in trace)
    assert on_edge >= 100


def test_identical_prompts_arrive_in_the_same_step():
    ties = 0
    for scenario in _scenarios():
        trace = scenario.trace()
        seen = {}
        for request, step in zip(trace, arrival_steps(scenario), strict=True):
            key = (tuple(trace.request_seq(request.id).token_ids()[: trace.prompt_len(request.id)]), step)
            ties += key in seen
            seen[key] = request.id
    assert ties >= 20


@pytest.mark.parametrize("value", [2, 3, 17])
def test_boundaries_hold_every_unit_minus_one_plus_one(value):
    from dataclasses import replace

    config = replace(generate_boundary("sglang", 0).config, page_size=value, chunked_prefill_size=value * 4)
    edges = boundaries(config)
    for unit in (value, value * 4):
        assert {unit - 1, unit, unit + 1} <= set(edges)


def test_pressure_pools_sit_at_one_requests_need():
    for seed in (seed for seed in range(40) if seed not in targeted_seeds("sglang")):
        scenario = generate_boundary("sglang", seed, pressure=True)
        trace, page = scenario.trace(), scenario.config.page_size
        needs = sorted(-(-(trace.prompt_len(r.id) + r.output_len) // page) * page for r in trace)
        if max(r.output_len for r in trace) > CLIP_MAX_NEW_TOKENS:  # two admitted, both cannot finish
            assert needs[-2] + CLIP_MAX_NEW_TOKENS // 2 < scenario.config.full_tokens < needs[-1] + needs[-2]
            continue
        assert needs[-1] <= scenario.config.full_tokens <= needs[-1] + 12 * page


def test_outputs_past_sglangs_decode_estimate_are_drawn():
    every = [generate_boundary(e, seed, p) for e in ENGINES for seed in range(40) for p in (False, True)]
    past = [s for s in every if max(r.output_len for r in s.trace()) > CLIP_MAX_NEW_TOKENS]
    assert {s.engine for s in past} == {"sglang", "vllm"}  # FreeToken retracts nothing


def test_an_unknown_engine_is_named():
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        generate_boundary("tgi", 0)
