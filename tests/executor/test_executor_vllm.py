"""`execute --policy vllm`: the executor's memory mirrors vLLM's block pool (one tensor pool per KV cache
group, addressed by the shared pool's block ids, poisoned where vLLM discards a block), so every reuse is
proved bit for bit; and vLLM's negative controls are flagged on exactly the requests their fault reaches
(block_probe.py proves from the manager's own tables that the trace reaches the fault)."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from block_probe import BlockProbe  # noqa: E402

from executor.execute import execute  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace import Request, Segment, Trace  # noqa: E402
from sim.trace.generate import multiturn  # noqa: E402


def _run(trace, policy, model, knobs=None, kernels="torch", device="cpu"):
    config = SimConfig(policy=policy, model=model, gpu="cpu", knobs=knobs or {}, pool_tokens=20_000)
    return execute(trace, config, device=device, kernels=kernels)


def _multiturn(system_len=100):
    return multiturn(num_sessions=2, num_turns=3, system_len=system_len, user_len=12, output_len=10,
                     request_rate=50.0)


@pytest.mark.interpreted  # its probe patches the manager, compiled under HYBRIDCACHE_COMPILED
@pytest.mark.parametrize("model", ["tiny", "tiny-swa", "inkling", "gemma-4-26b-a4b"])
@pytest.mark.parametrize("async_scheduling", [True, False])
def test_vllm_reuse_is_bit_exact(monkeypatch, model, async_scheduling, device):
    probe = BlockProbe(monkeypatch)
    result = _run(_multiturn(), "vllm", model, dict(async_scheduling=async_scheduling), device=device)
    summary = result.summary
    assert summary["requests_checked"] == 6 and summary["requests_reusing"] >= 4
    assert summary["requests_not_bit_exact"] == 0 and not probe.predicted_not_exact()


def test_vllm_on_the_triton_kernels(device):
    trace = multiturn(num_sessions=1, num_turns=2, system_len=50, user_len=4, output_len=3, request_rate=50.0)
    result = _run(trace, "vllm", "tiny", kernels="triton", device=device)
    assert result.summary["requests_not_bit_exact"] == 0 and result.summary["requests_reusing"] == 1


def _long_then_short():
    """r-long decodes past its window (64 + a block), r-short never does; nothing is shared."""
    return Trace([
        Request(id="r-long", arrival=0.0, prompt=[Segment(ref="a", len=50)], output_len=40),
        Request(id="r-short", arrival=0.0, prompt=[Segment(ref="b", len=30)], output_len=10),
    ])


@pytest.mark.interpreted  # its probe patches the manager, compiled under HYBRIDCACHE_COMPILED
def test_a_block_freed_while_still_read_is_caught(monkeypatch, device):
    probe = BlockProbe(monkeypatch)
    result = _run(_long_then_short(), "broken-vllm-early-free", "tiny-swa", device=device)
    assert probe.freed_read == {"r-long"}  # the trace reaches the fault on r-long only
    assert result.summary["not_bit_exact_ids"] == ["r-long"]
    assert result.summary["logprob_max_abs_diff"] == float("inf")  # it read NaN: the block was poisoned
    correct = _run(_long_then_short(), "vllm", "tiny-swa", device=device)
    assert correct.summary["requests_not_bit_exact"] == 0


def _past_state_trace():
    """r2 extends r1 (prompt + output): FULL caches 3 blocks of 528, the only Mamba state kept is r1's prompt
    checkpoint at 1056, so a hit past it claims 1584 while resuming from 1056."""
    prompt = [Segment(ref="sys", len=1100)]
    return Trace([
        Request(id="r1", arrival=0.0, prompt=prompt, output_len=500),
        Request(id="r2", after="r1", prompt=prompt + [Segment(output_of="r1"), Segment(ref="q", len=20)],
                output_len=4),
    ])


@pytest.mark.interpreted  # its probe patches the manager, compiled under HYBRIDCACHE_COMPILED
@pytest.mark.slow
def test_a_hit_past_the_retained_state_is_caught(monkeypatch, device):
    probe = BlockProbe(monkeypatch)
    result = _run(_past_state_trace(), "broken-vllm-hit-past-state", "qwen3.5-4b", device=device)
    assert probe.stale_state == {"r2": (1584, 1056)}
    assert result.summary["not_bit_exact_ids"] == ["r2"] and result.summary["logprob_max_abs_diff"] > 0
    correct = _run(_past_state_trace(), "vllm", "qwen3.5-4b", device=device)
    assert correct.requests.set_index("id").loc["r2", "cached_tokens"] == 1056
    assert correct.summary["requests_not_bit_exact"] == 0
