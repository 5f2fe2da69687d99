"""The boundary family's targeted seeds (conformance/generate_targeted.py), simulator side only: each shape
lands on the edge or the tie it is built for, so the decision it targets shows in what the simulator does
(a pool one token larger, or the other candidate evicted, would change the asserted outcome). The engines'
side is tests/conformance/test_suite_agrees.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.compare_steps import simulated_steps
from conformance.generate_boundary import generate_boundary
from conformance.generate_targeted import SHAPES, TARGETED_FROM, generate_targeted, targeted_seeds


def _first_batch_of(trajectory, request_id: str):
    return next(step for step in trajectory.steps if request_id in {item[0] for item in step.batch})


@pytest.mark.parametrize("engine", list(SHAPES))
def test_targeted_seeds_follow_the_drawn_ones_and_are_pure(engine):
    for seed in targeted_seeds(engine):
        for pressure in (False, True):
            scenario = generate_boundary(engine, seed, pressure)
            assert scenario == generate_targeted(engine, seed, pressure)
            assert scenario.kind == f"boundary-{SHAPES[engine][seed - TARGETED_FROM]}"
    assert generate_boundary(engine, TARGETED_FROM - 1).kind.startswith("boundary-")
    with pytest.raises(ValueError, match=f"{engine} has no targeted boundary scenario at seed 99"):
        generate_targeted(engine, 99, False)


@pytest.mark.parametrize("pressure", [False, True])
def test_decode_edge_refuses_by_one_token(pressure):
    """At the pool the shape draws, B waits for A to finish; one token more and B starts at its arrival."""
    scenario = generate_boundary("sglang", TARGETED_FROM + 1, pressure)
    at_edge = simulated_steps(scenario, "sglang-retain")
    assert _first_batch_of(at_edge, "B").at == at_edge.requests["A"].finished_at  # the step A ends
    roomier = replace(scenario, config=replace(scenario.config, full_tokens=scenario.config.full_tokens + 1))
    assert _first_batch_of(simulated_steps(roomier, "sglang-retain"), "B").at == 3


@pytest.mark.parametrize("pressure", [False, True])
def test_mixed_cut_ends_the_first_chunk_on_a_page(pressure):
    scenario = generate_boundary("sglang", TARGETED_FROM + 2, pressure)
    config = scenario.config
    step = _first_batch_of(simulated_steps(scenario, "sglang-retain"), "B")
    chunk = next(length for request_id, length, _ in step.batch if request_id == "B")
    assert step.at == 3 and ("A", 1, False) in step.batch  # beside A's decode token
    assert chunk == config.chunked_prefill_size - config.page_size  # not the budget less one token


@pytest.mark.parametrize("pressure", [False, True])
def test_dup_insert_keeps_the_refreshed_prompt(pressure):
    """The second copy of X refreshed X's path and state after Y's: the eviction takes Y's."""
    trajectory = simulated_steps(generate_boundary("sglang", TARGETED_FROM, pressure), "sglang-retain")
    assert {item[0] for item in trajectory.steps[0].batch} == {"X", "Y", "X2"}
    assert (trajectory.requests["PX"].cached_tokens, trajectory.requests["PY"].cached_tokens) == (256, 0)


@pytest.mark.parametrize("preset", ["freetoken", "freetoken-lazy"])
@pytest.mark.parametrize("pressure", [False, True])
def test_tied_states_evict_the_deeper_snapshot(preset, pressure):
    """FreeToken's heap, built in its scan order, pops the deeper of the two tied snapshots: C still finds the
    one at 128."""
    trajectory = simulated_steps(generate_boundary("freetoken", TARGETED_FROM, pressure), preset)
    assert trajectory.requests["B"].cached_tokens == 160
    assert trajectory.requests["C"].cached_tokens == 128


@pytest.mark.parametrize("pressure", [False, True])
def test_swa_admit_turns_on_one_swa_token(pressure):
    """FreeToken admits the third prompt one step earlier with one more SWA token: its need is met exactly."""
    scenario = generate_boundary("freetoken", TARGETED_FROM + 1, pressure)
    roomier = replace(scenario, config=replace(scenario.config, swa_tokens=scenario.config.swa_tokens + 1))
    at_edge = _first_batch_of(simulated_steps(scenario, "freetoken"), "s2").at
    assert _first_batch_of(simulated_steps(roomier, "freetoken"), "s2").at == at_edge - 1


def test_swa_cap_leaves_the_long_prompt_one_block_short():
    scenario = generate_boundary("vllm", TARGETED_FROM, pressure=False)
    at_edge = simulated_steps(scenario, "vllm")
    assert _first_batch_of(at_edge, "B").at == at_edge.requests["A"].finished_at  # B waits for A
    roomier = replace(scenario, config=replace(scenario.config, num_blocks=scenario.config.num_blocks + 1))
    assert _first_batch_of(simulated_steps(roomier, "vllm"), "B").at == 8  # its arrival


def test_the_long_seeds_draw_prompts_of_16k_to_32k_tokens_spaced_too():
    from conformance.generate_boundary import generate_boundary
    from conformance.generate_targeted import long_seeds
    from conformance.scenario import served_requests
    from conformance.spaced import generate_spaced

    longest = 0
    for engine in ("sglang", "freetoken", "vllm"):
        for seed in long_seeds(engine):
            for pressure in (False, True):
                scenario = generate_boundary(engine, seed, pressure)
                first, sibling, follow_up = (len(r.prompt) for r in served_requests(scenario))
                assert 16_000 <= first <= 30_000 and first // 2 <= sibling - 1 and first < follow_up <= 32_768
                longest = max(longest, follow_up)
                spaced = generate_spaced(engine, seed, pressure)
                assert [len(r.prompt) for r in served_requests(spaced)] == [first, sibling, follow_up]
    assert longest > 32_000
