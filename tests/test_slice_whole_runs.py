"""Whole runs with ``TokenSeq.slice`` cut by its runs' bounds (``SLICE_BY_BOUNDS``, sim/tokens.py) and by the
run-by-run reference give identical tables and summaries; the bounds' cut is reached across several runs in
the runs compared (a floor counted in this test's own runs)."""
from __future__ import annotations

import pytest

from sim import tokens
from sim.bounds import trie_cursor
from sim.run.simulate import SimConfig, simulate
from sim.tokens import TokenSeq
from sim.trace import load_trace

CASES = [("radix", "timed"), ("radix", "replay"), ("sglang", "timed"), ("marconi-sglang", "timed"), ("vllm", "timed")]


@pytest.mark.interpreted  # counts the cuts by patching TokenSeq._cut
@pytest.mark.parametrize("policy, mode", CASES)
def test_slice_by_bounds_changes_no_table(policy, mode, monkeypatch):
    trace = load_trace("traces/mooncake_conversation_500.jsonl")
    trace = type(trace)(list(trace)[:200])
    config = SimConfig(policy=policy, mode=mode, pool_tokens=300_000)
    num_multi_run_cuts = [0]
    cut = TokenSeq._cut

    def counted_cut(self, starts, first, start, end):
        sliced = cut(self, starts, first, start, end)
        num_multi_run_cuts[0] += len(sliced.runs) > 1
        return sliced

    monkeypatch.setattr(TokenSeq, "_cut", counted_cut)
    # the bounds' trie slices its page keys only on its reference path: with its cursor's keys (the default) a
    # ``vllm`` run makes ~7 multi-run cuts here, too few to compare the two slices by
    monkeypatch.setattr(trie_cursor, "CURSOR_DIRECT", False)
    fast = simulate(trace, config)
    monkeypatch.setattr(tokens, "SLICE_BY_BOUNDS", False)
    reference = simulate(trace, config)
    assert fast.requests.equals(reference.requests)
    assert fast.steps.equals(reference.steps)
    assert fast.summary == reference.summary
    assert num_multi_run_cuts[0] >= 100, num_multi_run_cuts[0]  # at 80 requests: 155 (vllm) to 774 (sglang)
