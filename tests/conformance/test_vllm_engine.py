"""The vLLM 0.33.0 oracle (conformance/engines/vllm.py): generated scenarios run, and hand-made ones give the
hit that vLLM's rules (docs/vllm-rules.md) derive. Needs pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt installed."""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.engines import vllm as engine  # imports vLLM only when a test calls it
from conformance.generate import generate
from conformance.generate_pools import vllm_min_blocks
from conformance.scenario import EngineConfig, Scenario, trace_lines

# Found, not imported: importing vLLM imports Triton, and the executor tests need Triton imported after their
# conftest sets TRITON_INTERPRET (collection runs every conftest before the first test).
pytestmark = pytest.mark.skipif(find_spec("vllm") is None, reason="vLLM 0.33.0 is not installed "
                                "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)")


def _config(components: str, page: int, window: int = 0, max_batched: int = 8192, retention: int | None = 0,
            num_blocks: int = 4000, max_model_len: int = 8192, checkpoints: bool = False) -> EngineConfig:
    return EngineConfig(components, page, window, track_interval=64, mamba_chunk=64,
                        chunked_prefill_size=max_batched, swa_eviction_interval=128, full_tokens=0,
                        swa_tokens=0, mamba_states=0, num_blocks=num_blocks, retention_interval=retention,
                        prefill_checkpoints=checkpoints, max_model_len=max_model_len)


def _hits(config: EngineConfig, requests: list[tuple[str, list[tuple[str, int]], int]]) -> list[int]:
    """Serve (id, [(ref, len), ...], output_len) requests one after another; vLLM's cached tokens each."""
    lines = []
    for index, (request_id, prompt, output_len) in enumerate(requests):
        line = {"id": request_id, "prompt": [{"ref": ref, "len": n} for ref, n in prompt],
                "output_len": output_len}
        line.update({"arrival": 0.0} if index == 0 else {"after": requests[index - 1][0]})
        lines.append(line)
    scenario = Scenario("hand", "vllm", 0, "hand", False, config, trace_lines(lines))
    return [outcome.cached_tokens for outcome in engine.run(scenario).values()]


def _sightings(prefix: int, unique: int, count: int) -> list:
    return [(f"s{i}", [("shared", prefix), (f"u{i}", unique)], 8) for i in range(count)]


def test_a_prompt_of_at_most_one_block_never_hits():
    """vllm#40696: with Qwen3.5-4B's block of 528 a resent prompt of 500 tokens gets nothing (the hit is capped
    at N-1 and lands on whole blocks); one of 1000 gets one block."""
    config = _config("full+mamba", 528)
    assert _hits(config, [("a", [("x", 500)], 5), ("b", [("x", 500)], 5)]) == [0, 0]
    assert _hits(config, [("a", [("x", 1000)], 5), ("b", [("x", 1000)], 5)]) == [0, 528]


def test_a_shared_prefix_off_the_block_grid_hits_from_its_third_sighting():
    """vllm#45238 (1600 shared + 600 unique, block 528, 2048 batched tokens): the first prompt keeps only its
    own prompt checkpoint, the second finds FULL blocks up to 1584 but no Mamba state there (0) and writes the
    junction state, the third hits 1584. Dense retention keeps the chunk-end state at 1584 already."""
    assert _hits(_config("full+mamba", 528, max_batched=2048), _sightings(1600, 600, 4)) == [0, 0, 1584, 1584]
    dense = _config("full+mamba", 528, max_batched=2048, retention=None)
    assert _hits(dense, _sightings(1600, 600, 3)) == [0, 1584, 1584]
    # 1500 shared: the chunk ends at 1584, past the prefix, so even dense retention misses the second sighting
    assert _hits(dense, _sightings(1500, 700, 3)) == [0, 0, 1056]


def test_chunking_adds_mamba_hits_only_under_dense_retention():
    """vllm#42317: chunk ends leave states; dense retention keeps the one at 2048 for a prompt sharing 2500
    tokens, retention 0 keeps only the prompt checkpoint (2992). Either way the second prompt's FULL hit
    (2496) beats its Mamba hit, so it writes the junction state there for the third."""
    requests = [("a", [("x", 3000)], 10)] + [(f"b{i}", [("x", 2500), (f"y{i}", 300)], 10) for i in range(2)]
    dense = [_hits(_config("full+mamba", 16, max_batched=batched, retention=None), requests)
             for batched in (8192, 1024)]
    assert dense == [[0, 0, 2496], [0, 2048, 2496]]
    assert _hits(_config("full+mamba", 16, max_batched=1024), requests) == [0, 0, 2496]


def test_sliding_window_needs_its_window_of_blocks_before_the_hit():
    """Window 64, block 16: a hit needs the cdiv(63, 16) = 4 blocks before it. Retention 0 keeps them only
    before the replay boundary (floor(199/16)*16 = 192) and, once seen twice, the junction (144)."""
    config = _config("full+swa", 16, window=64)
    assert _hits(config, [("a", [("x", 200)], 3), ("b", [("x", 200)], 3)]) == [0, 192]
    diverging = [("a", [("x", 200)], 3)] + [(f"b{i}", [("x", 150), (f"y{i}", 30)], 3) for i in range(3)]
    assert _hits(config, diverging) == [0, 0, 144, 144]


def test_internal_prefill_checkpoint_is_the_prompt_boundary():
    """FlashInfer GDN exports the checkpoint at floor((N-1)/B)*B inside the single prefill chunk."""
    config = _config("full+mamba", 64, checkpoints=True)
    assert _hits(config, [("a", [("x", 1000)], 3), ("b", [("x", 1000)], 3)]) == [0, 960]


def test_a_full_pool_evicts_the_tail_block_first_and_the_hit_is_lost():
    """Freed hashed blocks queue tail-first at the LRU end; a long unrelated request then takes more than the
    free unhashed blocks, so it evicts block 5 of `a` (tokens 80..96). The FULL hit falls to 80, below the
    only Mamba state (96): nothing is reused. With a large pool the resend gets floor(99/16)*16 = 96."""
    requests = [("a", [("x", 100)], 1), ("b", [("y", 250)], 1), ("c", [("x", 100)], 1)]
    tight = _config("full+mamba", 16, max_model_len=272, num_blocks=0)
    tight = EngineConfig(**{**tight.__dict__, "num_blocks": vllm_min_blocks(tight)})
    assert _hits(tight, requests) == [0, 0, 0]
    assert _hits(_config("full+mamba", 16, max_model_len=272), requests) == [0, 0, 96]


@pytest.mark.parametrize(("config", "reason"), [
    (_config("full+swa", 8, window=64), "kernel block"),
    (_config("full+mamba", 16, retention=24), "multiple of scheduler_block_size"),
    (_config("full+mamba", 16, checkpoints=True), "align blocks to 64"),
    (_config("full+swa+mamba", 16, window=64, num_blocks=50, max_model_len=2048), "max seq len"),
])
def test_vllm_refuses_what_it_cannot_start_with(config, reason):
    assert reason in engine.accepts(config)


@pytest.mark.parametrize(("components", "page", "checkpoints"), [
    ("full+swa", 32, False), ("full+mamba", 32, False), ("full+swa+mamba", 32, False), ("full+mamba", 64, True)])
def test_the_generators_smallest_pool_is_vllms(components, page, checkpoints):
    """generate.vllm_min_blocks is vLLM's start-up check (get_kv_cache_configs): it passes, one block less not."""
    config = _config(components, page, window=100, max_batched=512, max_model_len=1536, num_blocks=0,
                     checkpoints=checkpoints)
    smallest = vllm_min_blocks(config)
    assert engine.accepts(EngineConfig(**{**config.__dict__, "num_blocks": smallest})) is None
    assert "max seq len" in engine.accepts(EngineConfig(**{**config.__dict__, "num_blocks": smallest - 1}))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("pressure", [False, True])
def test_generated_scenarios_run_and_repeat_exactly(seed, pressure):
    scenario = generate("vllm", seed, pressure)
    assert engine.accepts(scenario.config) is None
    first = engine.run(scenario)
    assert list(first) == [request.id for request in scenario.trace()]  # one outcome each, serving order
    assert all(outcome.served and outcome.cached_tokens % scenario.config.page_size == 0
               for outcome in first.values())
    assert engine.run(scenario) == first


def test_unequal_pages_give_the_groups_their_own_block_sizes_and_simulate_agrees():
    # tests/vllm_geometry_scenarios.py: FULL blocks of 32 beside SWA blocks of 16, hits on the lcm
    from conformance.compare import disagreements
    from tests import vllm_geometry_scenarios as hand

    scenario = hand.unequal_pages()
    result = engine.run(scenario)
    assert [outcome.cached_tokens for outcome in result.values()] == hand.UNEQUAL_PAGES
    assert disagreements(scenario, "vllm", result) == []


@pytest.mark.parametrize("async_scheduling", [True, False], ids=["async", "sync"])
def test_the_concurrent_siblings_give_the_recorded_steps_and_simulate_agrees(async_scheduling):
    # tests/vllm_concurrent_scenarios.py: running first, preemption by recompute, async scheduling's lag
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference
    from tests import vllm_concurrent_scenarios as hand

    scenario = hand.siblings(async_scheduling)
    run = engine.run_steps(scenario)
    assert [(step.at, step.batch) for step in run.steps[:5]] == hand.FIRST_BATCHES[async_scheduling]
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.PREEMPTED[async_scheduling]
    assert hand.outcomes(run.requests) == hand.OUTCOMES[async_scheduling]
    assert first_difference(run, simulated_steps(scenario, "vllm")) is None
