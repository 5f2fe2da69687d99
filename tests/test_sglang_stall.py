"""A chunked prefill that stalls on an idle SGLang server is given up on after the one pass that admitted
nothing, and what the abandoned prompt leaves in the tree is evicted in SGLang's order (pinned with SGLang
0.5.23's answer on the hand-made scenario of tests/sglang_stall_scenarios.py; tests/conformance runs SGLang
again)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from tests import sglang_stall_scenarios as hand


def test_simulate_gives_up_on_the_stalled_chunk_and_evicts_as_sglang_did():
    run = simulated_steps(hand.stalled_chunk(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps if 8 <= step.at <= 12] == hand.STEPS
    assert len(run.steps) == hand.NUM_STEPS
    outcomes = {name: (s.cached_tokens, s.served, s.finished_at) for name, s in run.requests.items()}
    assert outcomes == hand.OUTCOMES
    assert "stalled mid prefill" in run.requests["e0"].note
