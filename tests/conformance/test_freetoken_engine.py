"""FreeToken 0.2.1's own cache code driven on scenarios: hand-made ones whose answer follows from FreeToken's
rules (read in its source), and generated ones compared with ``simulate`` where they are known to agree.

Skipped when FreeToken is not installed (``pip install --no-deps -c constraints-cpu.txt -r
conformance/requirements.txt``).
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conformance.engines import freetoken
from conformance.generate import generate
from conformance.scenario import EngineConfig, Scenario, trace_lines

pytestmark = [
    pytest.mark.skipif(freetoken.installed_version() is None,
                       reason="FreeToken is not installed: pip install --no-deps -c constraints-cpu.txt "
                              "-r conformance/requirements.txt"),
    pytest.mark.filterwarnings("ignore:Triton is not supported on current platform"),
]

W = 1024


def swa_config(**knobs) -> EngineConfig:
    base = EngineConfig("full+swa", page_size=1, window=W, track_interval=256, mamba_chunk=64,
                        chunked_prefill_size=8192, swa_eviction_interval=128, full_tokens=40000,
                        swa_tokens=40000, mamba_states=0)
    return replace(base, **knobs)


def gdn_config(**knobs) -> EngineConfig:
    base = EngineConfig("full+mamba", page_size=1, window=0, track_interval=256, mamba_chunk=64,
                        chunked_prefill_size=8192, swa_eviction_interval=128, full_tokens=40000,
                        swa_tokens=0, mamba_states=64)
    return replace(base, **knobs)


def scenario(config: EngineConfig, requests: list[dict], name: str = "hand") -> Scenario:
    chained = [dict(r, arrival=0.0) if i == 0 else dict(r, after=requests[i - 1]["id"])
               for i, r in enumerate(requests)]
    return Scenario(name, "freetoken", 0, "hand", False, config, trace_lines(chained))


def divergence(config: EngineConfig, prompt_len: int, shared: int, output_len: int = 3) -> Scenario:
    """Request b shares request a's first ``shared`` prompt tokens, then differs."""
    return scenario(config, [
        {"id": "a", "prompt": [{"ref": "x", "len": prompt_len}], "output_len": output_len},
        {"id": "b", "prompt": [{"ref": "x", "len": shared}, {"ref": "y", "len": 40}], "output_len": output_len},
    ])


def cached(result) -> dict[str, int]:
    assert all(outcome.served for outcome in result.values()), result
    return {request_id: outcome.cached_tokens for request_id, outcome in result.items()}


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("distance, reused", [(1, True), (16, True), (17, False), (300, False)])
def test_issue_200_cliff_as_shipped(overlap, distance, reused):
    """0.2.1's finish trims the prompt head's SWA to [L - W - 16, L): a prompt diverging at D reuses D
    while L - D <= 16 and nothing from 17 on (the live run from the trim point must reach W)."""
    prompt_len = 1500
    result = freetoken.run(divergence(swa_config(overlap=overlap), prompt_len, prompt_len - distance))
    assert cached(result) == {"a": 0, "b": prompt_len - distance if reused else 0}


@pytest.mark.parametrize("distance", [16, 17, 300, 1400])
def test_pr_488_reuses_at_any_distance(distance):
    prompt_len = 1500
    result = freetoken.run(divergence(swa_config(), prompt_len, prompt_len - distance), "freetoken-lazy")
    assert cached(result) == {"a": 0, "b": prompt_len - distance}


def test_a_window_locked_by_nothing_still_needs_w_live_tokens():
    """A short shared prefix (< W) on a tombstone-free path is reusable: the path is live from the root."""
    result = freetoken.run(divergence(swa_config(), prompt_len=600, shared=300))
    assert cached(result) == {"a": 0, "b": 300}


def test_gdn_reuse_lands_on_the_prefill_snapshot_or_the_finish_state():
    """GDN: the prefill snapshot is at cached_len + (extend - 1) // 64 * 64 of the final chunk (192 for a
    200-token prompt); the finish donates the live state at cached_len = L + g - 1 when page-aligned."""
    requests = [
        {"id": "a", "prompt": [{"ref": "x", "len": 200}], "output_len": 1},
        {"id": "b", "prompt": [{"ref": "x", "len": 199}, {"ref": "y", "len": 30}], "output_len": 1},
        {"id": "c", "prompt": [{"ref": "x", "len": 200}, {"ref": "z", "len": 40}], "output_len": 1},
    ]
    assert cached(freetoken.run(scenario(gdn_config(), requests))) == {"a": 0, "b": 192, "c": 200}


def test_gdn_intermediate_chunks_leave_no_snapshot():
    """With 64-token chunks no extend holds a 64-boundary strictly inside it, and the continuation Req
    drops any earlier track: only the finish state (at 228, page 4 aligned) is in the tree."""
    requests = [
        {"id": "a", "prompt": [{"ref": "x", "len": 228}], "output_len": 1},
        {"id": "b", "prompt": [{"ref": "x", "len": 195}, {"ref": "y", "len": 50}], "output_len": 1},
        {"id": "c", "prompt": [{"ref": "x", "len": 228}, {"ref": "z", "len": 10}], "output_len": 1},
    ]
    config = gdn_config(page_size=4, chunked_prefill_size=64)
    assert cached(freetoken.run(scenario(config, requests))) == {"a": 0, "b": 0, "c": 228}


def test_gdn_multiturn_resumes_at_the_unaligned_finish_only_on_page_one():
    """The finish state sits at L + g - 1; a page-16 engine drops it when that is not a page end."""
    requests = [
        {"id": "t0", "prompt": [{"ref": "x", "len": 300}], "output_len": 20},
        {"id": "t1", "prompt": [{"ref": "x", "len": 300}, {"output_of": "t0"}, {"ref": "u", "len": 9}],
         "output_len": 1},
    ]
    assert cached(freetoken.run(scenario(gdn_config(), requests)))["t1"] == 319
    assert cached(freetoken.run(scenario(gdn_config(page_size=16), requests)))["t1"] == 256


def test_accepts_names_freetokens_own_rules():
    assert "three-component" in freetoken.accepts(replace(swa_config(), components="full+swa+mamba"))
    assert "page_size=1" in freetoken.accepts(swa_config(page_size=16))
    assert "CHUNK_SIZE(64) % page_size(128)" in freetoken.accepts(gdn_config(page_size=128))
    assert "CHUNK_SIZE=64" in freetoken.accepts(gdn_config(mamba_chunk=128))
    assert freetoken.accepts(gdn_config(page_size=64)) is None
    with pytest.raises(ValueError, match="does not run"):
        freetoken.run(divergence(swa_config(page_size=4), 100, 50))
    with pytest.raises(ValueError, match="unknown FreeToken preset"):
        freetoken.run(divergence(swa_config(), 100, 50), "sglang")


def test_a_prompt_longer_than_the_pool_is_refused_and_the_next_one_still_runs():
    requests = [{"id": "big", "prompt": [{"ref": "x", "len": 900}], "output_len": 2},
                {"id": "small", "prompt": [{"ref": "y", "len": 100}], "output_len": 2}]
    result = freetoken.run(scenario(swa_config(full_tokens=800, swa_tokens=800), requests))
    assert not result["big"].served and "prompt is too long" in result["big"].note
    assert result["small"].served


def test_a_swa_pool_below_freetokens_floor_crashes_the_engine():
    """Decode frees out-of-window SWA only every 128 forwards: a pool of W + 40 runs dry and alloc_swa
    raises (FreeToken's own sizing never goes below its floor); the engine is then down."""
    requests = [{"id": "a", "prompt": [{"ref": "x", "len": 200}], "output_len": 100},
                {"id": "b", "prompt": [{"ref": "y", "len": 10}], "output_len": 2}]
    result = freetoken.run(scenario(swa_config(window=64, swa_tokens=104), requests))
    assert not result["a"].served and "SWA pool exhausted" in result["a"].note
    assert not result["b"].served and "raised on a" in result["b"].note


@pytest.mark.parametrize("seed, pressure", [(1, False), (7, False), (14, False), (2, True), (4, True), (15, True)])
def test_generated_swa_scenarios_agree_with_simulate(seed, pressure):
    from conformance.compare import disagreements

    scene = generate("freetoken", seed, pressure)
    assert scene.config.has_swa
    for preset in freetoken.PRESETS:
        result = freetoken.run(scene, preset)
        assert all(outcome.served for outcome in result.values())
        assert disagreements(scene, preset, result, modes=("replay",)) == []


def test_runs_are_repeatable():
    scene = generate("freetoken", 13, True)
    first = freetoken.run(scene)
    assert json.dumps(first) == json.dumps(freetoken.run(scene))


@pytest.mark.parametrize("overlap, reused", [(True, 62), (False, 61)])
def test_overlap_commits_the_prompt_and_the_first_decode_position(overlap, reused):
    """The overlap loop launches the first decode before it commits the prefill, so the commit covers
    L + 1 and the decode frees start there: a next turn matches up to L + 1 (the plain loop: L)."""
    requests = [
        {"id": "t0", "prompt": [{"ref": "x", "len": 61}], "output_len": 200},
        {"id": "t1", "prompt": [{"ref": "x", "len": 61}, {"output_of": "t0", "len": 26}, {"ref": "u", "len": 9}],
         "output_len": 1},
    ]
    config = swa_config(window=24, swa_eviction_interval=16, overlap=overlap)
    assert cached(freetoken.run(scenario(config, requests))) == {"t0": 0, "t1": reused}


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "plain-loop"])
def test_the_concurrent_siblings_give_the_recorded_steps_and_simulate_agrees(overlap):
    # tests/freetoken_concurrent_scenarios.py: shared pass budgets, table rows, the overlap's late commit
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import freetoken_concurrent_scenarios as hand

    scenario = hand.siblings(overlap)
    run = freetoken.run_steps(scenario, "freetoken")
    assert [(step.at, step.batch) for step in run.steps] == hand.BATCHES[overlap]
    assert hand.outcomes(run.requests) == hand.OUTCOMES[overlap]
    assert first_difference(run, simulated_steps(scenario, "freetoken")) is None


def test_a_request_done_at_its_prompt_is_released_before_the_next_commits():
    # FreeToken's plain loop walks the step in order (_process_last_data): r1's finish trims the head, then r2's
    # commit revives it (tests/freetoken_concurrent_scenarios.py: done_first); simulate agrees step by step
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import freetoken_concurrent_scenarios as hand

    scenario = hand.done_first()
    run = freetoken.run_steps(scenario, "freetoken")
    pools = {step.at: step.pools for step in run.steps}
    assert {at: pools[at] for at in hand.DONE_FIRST_POOLS} == hand.DONE_FIRST_POOLS
    assert hand.outcomes(run.requests) == hand.DONE_FIRST_OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "freetoken")) is None
