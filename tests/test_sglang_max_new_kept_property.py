"""SGLang's admission keeps the last request's clipped ``max_new_tokens`` for its next ask
(``sglang_admission.MAX_NEW_KEPT``): a request alone asks it twice at admission and at every chunk's charge.
Held to the reference (computed at every ask): the answers to generated asks of interleaved requests and pool
sizes, and whole runs, replay and timed, of the presets whose rules are SGLang's admission.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cache_helpers import hybrid_model
from hypothesis import given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways
from test_marconi_zero_alpha_property import _window_trace

from sim.cache.engines import sglang_admission, sglang_budget
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy
from sim.run.simulate import SimConfig, simulate


def _request(prompt_len: int, output_len: int) -> SimpleNamespace:
    return SimpleNamespace(prompt_len=prompt_len, output_len=output_len)


@pytest.mark.interpreted
@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 3000)), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1000, 4096, 9000])), min_size=1, max_size=30),
)
def test_each_ask_is_answered_as_computed_afresh(requests, asks):
    """Asks of a few requests in any order, the pool's size changing between them (0: no pool read yet)."""
    rules = make_manager(hybrid_model(), make_policy("sglang-retain"), PoolSizes(64, 64, 8)).rules
    made = [_request(*request) for request in requests]
    for index, pool_tokens in asks:
        req = made[index % len(made)]
        rules.full_pool_tokens = pool_tokens
        expected = (
            sglang_budget.max_new_tokens_for_memory(
                req.prompt_len, req.output_len, pool_tokens, rules.page_size
            )
            if pool_tokens
            else req.output_len
        )
        assert rules._max_new(req) == expected


@pytest.mark.parametrize("mode", ["replay", "timed"])
@pytest.mark.parametrize("policy", ["sglang-retain", "marconi", "marconi-sglang"])
def test_whole_runs_are_the_same_run(monkeypatch, policy, mode):
    """Tight pools (evictions, chunked prefills): equal tables and summary either way."""
    knobs = {"page_size": 1, "chunked_prefill_size": 64}
    config = SimConfig(policy=policy, model="tiny", mode=mode, bounds=False, pool_tokens=900, knobs=knobs)

    def run(on: bool) -> tuple:
        monkeypatch.setattr(sglang_admission, "MAX_NEW_KEPT", on)
        return (), simulate(_window_trace(), config)

    on, _ = same_both_ways(run)
    assert on[1].summary["evictions_full"] > 0
