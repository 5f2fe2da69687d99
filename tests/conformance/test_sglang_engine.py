"""The SGLang 0.5.23 conformance driver: SGLang's own cache code on CPU gives the numbers derived by hand
from its rules, refuses what SGLang refuses, and is deterministic.

Skipped when sglang is not installed (``pip install --no-deps -c constraints-cpu.txt -r
conformance/requirements.txt``).
"""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.compare import disagreements
from conformance.engines import sglang as driver
from conformance.generate import generate
from conformance.scenario import EngineConfig, Scenario, trace_lines
from tests import sglang_budget_scenarios as hand
from tests import sglang_recency_scenarios as recency

# find_spec, not an import: importing SGLang here would set Triton up before the executor tests can ask for its
# interpreter (the driver runs SGLang in a process of its own, tests/conformance/conftest.py)
pytestmark = pytest.mark.skipif(find_spec("sglang") is None, reason="sglang 0.5.23 is not installed "
                                "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)")


def _config(components: str, **overrides) -> EngineConfig:
    knobs = dict(components=components, page_size=64, window=128 if "swa" in components else 0,
                 track_interval=256, mamba_chunk=64, chunked_prefill_size=8192, swa_eviction_interval=128,
                 full_tokens=16384, swa_tokens=16384 if "swa" in components else 0,
                 mamba_states=64 if "mamba" in components else 0)
    knobs.update(overrides)
    return EngineConfig(**knobs)


def _scenario(config: EngineConfig, requests: list[dict]) -> Scenario:
    chained = [dict(r, arrival=0.0) if i == 0 else dict(r, after=requests[i - 1]["id"])
               for i, r in enumerate(requests)]
    return Scenario("hand", "sglang", 0, "hand", False, config, trace_lines(chained))


def _cached(result) -> list[int]:
    return [outcome.cached_tokens for outcome in result.values()]


def test_exact_repeat_finished_at_prefill_reuses_every_whole_page():
    # One output token: the request finishes at its prefill, so nothing frees SWA before the finish insert;
    # the repeat's key is prompt_len - 1 = 999 tokens, page-floored to 960, all live.
    prompt = [{"ref": "same", "len": 1000}]
    scenario = _scenario(_config("full+swa"), [{"id": "a", "prompt": prompt, "output_len": 1},
                                               {"id": "b", "prompt": prompt, "output_len": 1}])
    assert _cached(driver.run(scenario, "sglang-retain")) == [0, 960]


def test_a_request_finishing_at_its_prefill_inserts_its_window_live():
    # a: 1000 tokens in, one token out: release_kv_cache inserts [0, 960) with no out-of-window free, so b
    # (800 shared tokens, key floored to 768) splits a live node: 768 reused.
    shared = {"ref": "system", "len": 800}
    requests = [{"id": "a", "prompt": [shared, {"ref": "a-q", "len": 200}], "output_len": 1},
                {"id": "b", "prompt": [shared, {"ref": "b-q", "len": 50}], "output_len": 1}]
    assert _cached(driver.run(_scenario(_config("full+swa"), requests), "sglang")) == [0, 768]


def test_swa_frontier_at_a_prefill_checkpoint_counts_the_unfloored_prompt():
    # a: 2126 tokens in, W 24, page 64. Its prefill checkpoint frees SWA below
    # floor_64((2126 - 1) - ceil_64(max(24, 64))) = 2048, so [0, 2048) enters the tree as a tombstone.
    # b shares 2087 tokens: its key floors to 2048, a node with no live window under it: nothing reused.
    shared = {"ref": "system", "len": 2087}
    requests = [{"id": "a", "prompt": [shared, {"ref": "a-q", "len": 39}], "output_len": 2},
                {"id": "b", "prompt": [shared, {"ref": "b-q", "len": 49}], "output_len": 2}]
    config = _config("full+swa", window=24)
    assert _cached(driver.run(_scenario(config, requests), "sglang-retain")) == [0, 0]


def test_mamba_fanout_reuses_the_shared_prefix_only_after_a_branch_checkpoint():
    # a: prefill checkpoint at floor(612 / 64) * 64 = 576, past the shared 512. b: its FULL hit (512) splits
    # that node and ends on a state-less node (cached 0), but the split sets mamba_branching_seqlen = 512,
    # so b's extend checkpoints at 512. c then matches the 512 node with its state.
    shared = {"ref": "system", "len": 512}
    requests = [{"id": name, "prompt": [shared, {"ref": f"{name}-q", "len": own}], "output_len": 1}
                for name, own in (("a", 100), ("b", 50), ("c", 30))]
    result = driver.run(_scenario(_config("full+mamba"), requests), "sglang-retain")
    assert _cached(result) == [0, 0, 512]


def test_generated_scenarios_match_the_engine_numbers_recorded_for_0_5_23():
    # regression pins of SGLang's own answers (seed 1: a FULL+SWA repeat; seed 3: the same, chunked)
    assert _cached(driver.run(generate("sglang", 1), "sglang-retain")) == [0, 864]
    assert _cached(driver.run(generate("sglang", 3), "sglang")) == [0, 1472]


def test_pressure_scenarios_match_the_engine_numbers_recorded_for_0_5_23():
    # seed 163: the running request's 3 MAMBA slots leave 2 of 5 for the tree, so the 512 checkpoint is gone
    assert _cached(driver.run(generate("sglang", 163, pressure=True), "sglang")) == [0, 0]
    # seed 77: t0 runs out of SWA mid decode and, alone in its batch, is aborted by retract_decode; then
    # PrefillAdder never admits t1 (nor, in turn, t2 and t3) on the idle pool
    notes = [o.note.split(":")[0] for o in driver.run(generate("sglang", 77, pressure=True), "sglang").values()]
    assert notes == ["aborted", "never admitted", "never admitted", "never admitted"]


def _served(result) -> list[tuple[int, bool]]:
    return [(outcome.cached_tokens, outcome.served) for outcome in result.values()]


@pytest.mark.parametrize("scenario, expected", [
    *[(hand.locked_window(swa), answer) for swa, answer in hand.LOCKED_WINDOW.items()],
    *[(hand.decode_check(swa), answer) for swa, answer in hand.DECODE_CHECK.items()],
    (hand.budget_before_states(), hand.BUDGET_BEFORE_STATES),
], ids=["locked-window-176", "locked-window-192", "decode-check-176", "decode-check-192", "budget-before-states"])
def test_the_budget_scenarios_give_the_recorded_answers_and_simulate_agrees(scenario, expected):
    # PrefillAdder's SWA estimate against the window the match locks, check_decode_mem before the decode free,
    # the budget before any MAMBA slot (tests/sglang_budget_scenarios.py derives each answer)
    result = driver.run(scenario, "sglang")
    assert _served(result) == expected
    assert disagreements(scenario, "sglang", result) == []


@pytest.mark.parametrize("scenario, expected", [
    (recency.split_recency(), recency.SPLIT_RECENCY), (recency.insert_recency(), recency.INSERT_RECENCY),
], ids=["split-recency", "insert-recency"])
def test_the_recency_scenarios_give_the_recorded_answers_and_simulate_agrees(scenario, expected):
    # _split_node stamps both halves, _insert_walk_step every node it walks (tests/sglang_recency_scenarios.py)
    result = driver.run(scenario, "sglang")
    assert _served(result) == expected
    assert disagreements(scenario, "sglang", result) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(hand.RESOLVED_SEEDS))
def test_the_pressure_seeds_the_budget_resolved_agree_with_simulate(seed):
    scenario = generate("sglang", seed, pressure=True)
    for preset, expected in zip(hand.PRESETS, hand.RESOLVED_SEEDS[seed], strict=True):
        result = driver.run(scenario, preset)
        assert _served(result) == expected
        assert disagreements(scenario, preset, result) == []


def test_a_rerun_in_the_same_process_gives_the_same_outcomes():
    scenario = generate("sglang", 2, pressure=True)
    assert driver.run(scenario, "sglang-retain") == driver.run(scenario, "sglang-retain")


def test_too_few_mamba_states_is_refused_like_sglang_refuses_to_start():
    config = _config("full+mamba", mamba_states=4)
    assert "resolve_max_num_reqs" in driver.accepts(config)
    scenario = _scenario(config, [{"id": "a", "prompt": [{"ref": "x", "len": 100}], "output_len": 2}])
    assert driver.run(scenario, "sglang") == {"a": driver.EngineOutcome(0, False, driver.accepts(config))}


def test_chunk_not_a_page_multiple_is_refused():
    assert "divisible by page_size" in driver.accepts(_config("full+swa", chunked_prefill_size=100))


def test_unknown_preset_is_an_error():
    with pytest.raises(ValueError, match="unknown SGLang preset"):
        driver.run(generate("sglang", 1), "sglang-nope")


def test_the_concurrent_siblings_give_the_recorded_steps_and_simulate_agrees():
    # tests/sglang_concurrent_scenarios.py: prefill apart from decode, the overlap loop, retract_decode's order
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import sglang_concurrent_scenarios as steps

    scenario = steps.siblings()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch) for step in run.steps[:5]] == steps.FIRST_BATCHES
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == steps.RETRACTED
    assert steps.outcomes(run.requests) == steps.OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None


def test_the_plain_loop_gives_the_recorded_steps_and_simulate_agrees():
    # tests/sglang_concurrent_scenarios.py: event_loop_normal, a middle chunk stashed at the next scheduling
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import sglang_concurrent_scenarios as steps

    scenario = steps.chunked_plain_loop()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == steps.PLAIN_LOOP_STEPS
    assert steps.outcomes(run.requests) == steps.PLAIN_LOOP_OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None


@pytest.mark.parametrize("schedule_policy", ["fcfs", "lpm", "lof", "dfs-weight", "hrrn"])
def test_each_schedule_policy_gives_the_recorded_order_and_simulate_agrees(schedule_policy):
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import sglang_concurrent_scenarios as steps

    scenario = steps.queued(schedule_policy)
    run = driver.run_steps(scenario, "sglang")
    prefills = [(step.at, step.batch) for step in run.steps if step.batch[0][2] and step.at >= 3]
    assert prefills == steps.QUEUED_PREFILLS[schedule_policy]
    assert steps.outcomes(run.requests) == steps.QUEUED_OUTCOMES[schedule_policy]
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None


@pytest.mark.parametrize(
    "name, recorded",
    [("clipped_to_nothing", "CLIPPED"), ("freed_at_prefill", "FREED")],
    ids=["lof-clipped-to-nothing", "row-freed-at-a-prefill"],
)
def test_a_hand_made_scenario_gives_the_recorded_steps_and_simulate_agrees(name, recorded):
    # clipped_to_nothing: LOF sorts on max_new_tokens as SGLang clips it at arrival (0 here);
    # freed_at_prefill: a last prefill batch that filter_batch shrinks clears batch_is_full as it is merged
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import sglang_concurrent_scenarios as steps

    scenario = getattr(steps, name)()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps] == getattr(steps, f"{recorded}_STEPS")
    assert steps.outcomes(run.requests) == getattr(steps, f"{recorded}_OUTCOMES")
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None


def test_mixed_chunks_give_the_recorded_steps_and_simulate_agrees():
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import sglang_concurrent_scenarios as steps

    scenario = steps.mixed_chunks()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch) for step in run.steps if 10 <= step.at <= 15] == steps.MIXED_STEPS
    assert len(run.steps) == steps.MIXED_NUM_STEPS
    assert steps.outcomes(run.requests) == steps.MIXED_OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None
