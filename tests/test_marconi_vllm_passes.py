"""vLLM+ (``marconi-vllm``) keeps no SGLang pass accounts: ``MarconiVllmRules.begin_pass`` resets nothing
(replay begins a pass at every 32-token chunk), so no rule it runs may read them. With the accounts poisoned
(a read raises), replay and timed runs of a trace whose pool is evicted give the figures they give with the
accounts kept.
"""

from __future__ import annotations

import pytest

from sim.cache.engines.marconi_vllm import MarconiVllmRules
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace


def _trace() -> Trace:
    """Two shared heads, prompts of 700 to 1,400 tokens, decodes crossing blocks, arrivals overlapping."""
    return Trace(
        [
            Request(
                id=f"r{i}",
                arrival=i * 0.02,
                prompt=[Segment(ref=f"sys{i % 2}", len=500), Segment(ref=f"u{i}", len=200 + 70 * i)],
                output_len=40 + 7 * i,
            )
            for i in range(12)
        ]
    )


class _Poison:
    def __getattr__(self, name: str):
        raise AssertionError(f"vLLM+ read SGLang's pass accounts ({name})")

    def __contains__(self, item) -> bool:
        raise AssertionError("vLLM+ read SGLang's in-flight set")


@pytest.mark.interpreted
@pytest.mark.parametrize("mode", ["replay", "timed"])
def test_vllm_plus_reads_no_pass_accounts(mode, monkeypatch):
    config = SimConfig(policy="marconi-vllm", model="qwen3-next", mode=mode, bounds=False, pool_tokens=2400)
    kept = simulate(_trace(), config)
    init = MarconiVllmRules.__init__

    def poisoned(self, resolved):
        init(self, resolved)
        self.pass_budget = self.in_flight = _Poison()
        self.full_pool_tokens = None  # SGLang's generation clip reads the pool's size: a read fails too

    monkeypatch.setattr(MarconiVllmRules, "__init__", poisoned)
    result = simulate(_trace(), config)
    assert result.summary["evictions_full"] > 100  # the pool is evicted: reserve's every branch runs
    assert kept.requests.equals(result.requests) and kept.summary == result.summary
