"""Marconi (MLSys'25) and its baselines: admission at branch-off points and last decoded tokens, FLOP-aware
eviction against LRU under one byte budget, and the vLLM+ baseline's checkpoint every 32-token block."""
from __future__ import annotations

import pytest

from sim.cache.byte_budget import unit_bytes
from sim.cache.engines.marconi_tuner import AlphaTuner
from sim.engines.registry import PRESETS
from sim.models import get_model
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

MARCONI = ("marconi", "marconi-sglang", "marconi-vllm")


def _trace(*prompts: list[tuple[str, int]], output_len: int = 1) -> Trace:
    return Trace([Request(id=f"r{i}", arrival=float(i), prompt=[Segment(ref=r, len=n) for r, n in prompt],
                          output_len=output_len) for i, prompt in enumerate(prompts)])


def _cached(trace: Trace, policy: str, model: str = "qwen3-next", mode: str = "replay", **config) -> list[int]:
    result = simulate(trace, SimConfig(policy=policy, model=model, mode=mode, **config))
    assert result.summary["cached_tokens"] <= result.summary["bound_tokens"]
    return [int(c) for c in result.requests["cached_tokens"]]


@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_a_shared_prefix_is_reused_from_its_third_occurrence(mode):
    # the first request leaves a state only at its end; the second finds the branch-off point by speculative
    # insertion and checkpoints it; the third resumes there. vLLM+ checkpoints every block: its second hits
    trace = _trace(*[[("sys", 100), (f"u{i}", 10)] for i in range(4)])
    assert _cached(trace, "marconi", mode=mode) == [0, 0, 100, 100]
    assert _cached(trace, "marconi-sglang", mode=mode) == [0, 0, 100, 100]
    assert _cached(trace, "marconi-vllm", mode=mode) == [0, 96, 96, 96]


def test_a_follow_up_resumes_after_the_last_decoded_token():
    first = Request(id="a", arrival=0.0, prompt=[Segment(ref="sys", len=100)], output_len=20)
    second = Request(id="b", after="a", think_time=0.0, output_len=5,
                     prompt=[Segment(ref="sys", len=100), Segment(output_of="a"), Segment(ref="u", len=10)])
    trace = Trace([first, second])
    assert _cached(trace, "marconi") == [0, 119]  # the last sampled token is never computed
    assert _cached(trace, "marconi-vllm") == [0, 96]  # floor(119 / 32) blocks


def test_without_mamba_every_computed_page_is_kept():
    trace = _trace(*[[("sys", 100), (f"u{i}", 10)] for i in range(2)])
    assert _cached(trace, "marconi", model="tiny-swa") == [0, 100]


def _budget_for_one_eviction() -> float:
    """Room for A (4000 tokens) and B (64) with their states, and C running beside them with SGLang's three
    MAMBA slots less one state's worth: C's admission must evict A or B."""
    kv, _, state = unit_bytes(get_model("qwen3-next"), 1)
    return (4000 + 64 + 80) * kv + 4 * state


@pytest.mark.parametrize("last, lru_hit, flop_hit", [(("A", 4000), 0, 4000), (("B", 64), 64, 0)])
def test_flop_aware_eviction_keeps_the_long_prefix_lru_drops(last, lru_hit, flop_hit):
    # A is older than B, so recency alone evicts A; A's state saves far more FLOPs per byte than B's
    trace = _trace([("A", 4000)], [("B", 64)], [("C", 64)], [last, ("x", 8)])
    budget = _budget_for_one_eviction()
    assert _cached(trace, "marconi", cache_bytes=budget, knobs={"marconi_alpha": 0.0})[-1] == lru_hit
    assert _cached(trace, "marconi-sglang", cache_bytes=budget)[-1] == lru_hit
    assert _cached(trace, "marconi", cache_bytes=budget, knobs={"marconi_alpha": 2.0})[-1] == flop_hit


def test_only_flop_aware_eviction_tunes_alpha():
    assert not AlphaTuner(PRESETS["marconi"]).done
    assert AlphaTuner(PRESETS["marconi-sglang"]).done and AlphaTuner(PRESETS["marconi-vllm"]).done


def test_one_byte_budget_is_marconi_only():
    with pytest.raises(ValueError, match="--cache-bytes .* applies to marconi policies only"):
        simulate(_trace([("a", 8)]), SimConfig(policy="sglang", model="qwen3-next", cache_bytes=1e9))


@pytest.mark.parametrize("policy", MARCONI)
def test_a_byte_budget_too_small_for_one_page_is_refused(policy):
    with pytest.raises(ValueError, match="holds less than one"):
        simulate(_trace([("a", 8)]), SimConfig(policy=policy, model="qwen3-next", cache_bytes=100))


def test_experiment_rows_are_the_three_runs_hit_rates():
    from sim.experiments.marconi import marconi_experiment, parse_sizes
    from sim.trace.generate import multiturn

    trace = multiturn(num_sessions=4, num_turns=3, system_len=256, user_len=32, output_len=32, request_rate=2.0)
    table = marconi_experiment(trace, cache_gb=parse_sizes("0.5,4"), mode="timed")
    assert list(table["cache_gb"]) == [0.5, 4.0]
    for _, row in table.iterrows():
        runs = {p: simulate(trace, SimConfig(policy=p, model="qwen3-next", cache_bytes=row["cache_gb"] * 1e9))
                for p in MARCONI}
        prompts = sum(trace.prompt_len(r.id) for r in trace)
        for policy, label in (("marconi", "Marconi"), ("marconi-sglang", "SGLang+"), ("marconi-vllm", "vLLM+")):
            assert row[f"{label} hit rate"] == round(runs[policy].summary["cached_tokens"] / prompts, 4)
        assert row["bound hit rate"] >= row["Marconi hit rate"]
    with pytest.raises(ValueError, match="--cache-gb"):
        parse_sizes("1,-2")
