"""Marconi's and SGLang+'s runs nobody reads a page id of (a replay; a timed run on the simulator's own backend,
observed by no one) run on pools of anonymous page ids (``Engine.anonymous_manager``, switched by
``simulate.ANONYMOUS_IDS``; vLLM+ keeps real ids): their tables hold no page id, and no rule of Marconi's nor
SGLang's loop reads one, so the run must decide exactly as on pools handing out real ids. As a property over
generated runs (the two presets; SWA + MAMBA, SWA, MAMBA and FULL + SWA models; pages 1, 2 and 16; tight pools
and few states, so that leaves are evicted and the alpha tuner forks its replays; SGLang's pools or one byte
budget; bounds on and off; replay and timed): the run's tables and summary, every allocation's pool and length,
every tree's nodes as the run ends (the tuner's throwaway trees too: span, FULL and SWA page counts, state,
stamp, locks), the pools' free counts and the eviction counts equal the reference's, the run on real ids.
Fixed cases (the ``@example``s) hold floors on the anonymous path's use: it hands out anonymous ids by the
thousand and evicts, so freed pages are handed out again.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.components import Component
from sim.cache.events import SlotsFreed
from sim.cache.pools import ANONYMOUS_ID
from sim.run.setup import build
from sim.run.simulate import SimConfig, run_timed
from sim.trace.generate import fanout, multiturn
from tests.anonymous_runs import run_logged


def assert_anonymous_run_equal(trace, config, monkeypatch) -> tuple[list, list]:
    """The two runs (in ``config``'s mode) equal; returns the anonymous one's log and the FULL and SWA ids the
    reference's own cache handed out (those the anonymous run's cache handed out as ``ANONYMOUS_ID``)."""
    (anonymous_log, _, anonymous_ids), (_, _, real_ids) = same_both_ways(
        lambda anonymous: run_logged(trace, config, anonymous, monkeypatch)
    )
    # the switch did switch: no real id handed out; the reference's own cache hands out real ones only
    assert {page for _, page in anonymous_ids} <= {ANONYMOUS_ID}
    own_ids = [page for in_anonymous_pool, page in real_ids if not in_anonymous_pool]
    assert ANONYMOUS_ID not in own_ids
    return anonymous_log, own_ids


MODELS = ["tiny", "tiny-swa", "qwen3-next", "inkling", "gpt-oss-20b"]


@st.composite
def marconi_cases(draw):
    """A multi-turn or fan-out trace on Marconi or SGLang+, small pages and chunks, pools the run fills."""
    page = draw(st.sampled_from([1, 1, 2, 16]))
    knobs: dict = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(2, 8)))
    if draw(st.booleans()):
        knobs["marconi_follows"] = "code"
    model = draw(st.sampled_from(MODELS))
    if model in ("tiny", "tiny-swa", "inkling", "gpt-oss-20b") and draw(st.booleans()):
        knobs["window"] = draw(st.integers(2, 6)) * 16
    seed = draw(st.integers(0, 50))
    if draw(st.booleans()):
        trace = _turns(seed, draw(st.integers(2, 4)), draw(st.integers(2, 5)))
    else:
        trace = fanout(
            num_groups=draw(st.integers(1, 3)), prompts_per_group=draw(st.integers(2, 5)), system_len=300,
            question_len=50, output_len=draw(st.integers(10, 80)), seed=seed,
        )  # fmt: skip
    config = SimConfig(
        policy=draw(st.sampled_from(["marconi", "marconi-sglang"])), model=model, knobs=knobs,
        pool_tokens=draw(st.integers(500, 3_000)), mamba_states=draw(st.integers(4, 30)),
        bounds=draw(st.booleans()), mode=draw(st.sampled_from(["replay", "timed"])),
    )  # fmt: skip
    if draw(st.integers(0, 3)) == 0:  # one byte budget for every pool
        budget = draw(st.integers(1, 40)) * 2**20
        config = replace(config, pool_tokens=None, mamba_states=None, cache_bytes=budget)
    return trace, config


def _turns(seed: int, num_sessions: int = 4, num_turns: int = 6):
    return multiturn(
        num_sessions=num_sessions, num_turns=num_turns, system_len=300, user_len=100, output_len=100,
        think_time=0.2, request_rate=4.0, seed=seed,
    )  # fmt: skip


def _config(policy: str, model: str, pool_tokens: int, mode: str = "replay") -> SimConfig:
    """Page 1, few states, pools the run fills."""
    knobs = dict(page_size=1, chunked_prefill_size=16)
    return SimConfig(
        policy=policy,
        model=model,
        knobs=knobs,
        pool_tokens=pool_tokens,
        mamba_states=12,
        bounds=False,
        mode=mode,
    )


# (trace, config, floors: ids the run's own cache hands out, FULL evictions of the run's own tree, trees
# thrown away: the run's and, the third, the alpha tuner's 21 replays after the first eviction)
FIXED_CASES = [
    (_turns(1), _config("marconi", "inkling", 1_200), (7_000, 10, 1)),
    (_turns(2), _config("marconi-sglang", "tiny-swa", 1_000), (5_000, 15, 1)),
    (
        fanout(num_groups=3, prompts_per_group=5, system_len=400, question_len=50, output_len=80, seed=3),
        _config("marconi", "qwen3-next", 900),
        (4_000, 12, 22),
    ),
    (_turns(1), _config("marconi", "inkling", 1_200, "timed"), (7_000, 10, 1)),
    (_turns(2), _config("marconi-sglang", "tiny-swa", 1_000, "timed"), (5_000, 15, 1)),
]


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=marconi_cases())
@example(case=FIXED_CASES[0][:2])
@example(case=FIXED_CASES[1][:2])
@example(case=FIXED_CASES[2][:2])
@example(case=FIXED_CASES[3][:2])
@example(case=FIXED_CASES[4][:2])
def test_the_anonymous_run_equals_the_run_on_real_ids(case, monkeypatch):
    trace, config = case
    assert_anonymous_run_equal(trace, config, monkeypatch)  # a configuration Marconi refuses: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", FIXED_CASES)
def test_the_fixed_runs_use_the_anonymous_pools_and_evict(trace, config, floors, monkeypatch):
    """A test of the fixed examples: their own caches hand out anonymous ids by the thousand and evict (so that
    freed ids are handed out again: a replay that never reused a page would pass anything); the third tunes
    alpha on forked throwaway caches."""
    log, own_ids = assert_anonymous_run_equal(trace, config, monkeypatch)
    num_ids, num_full_evictions, num_trees = floors
    assert len(own_ids) >= num_ids
    assert log[-1][2][Component.FULL] >= num_full_evictions
    assert sum(isinstance(entry, tuple) and isinstance(entry[-1], dict) for entry in log) >= num_trees


@pytest.mark.interpreted  # counts ids through a patched ``Pool.alloc``, which compiled callers never reach
def test_an_observed_timed_run_and_vllm_plus_keep_real_ids(monkeypatch):
    """Only runs of Marconi or SGLang+ that nobody reads an id of switch: an observed timed run of the same
    case (an observer may read the ids its events carry) and a vLLM+ replay hand out real ids from their own
    pools."""
    trace, config, _ = FIXED_CASES[0]
    vllm_plus = replace(config, policy="marconi-vllm", knobs=dict(page_size=16, chunked_prefill_size=32))
    ids = run_logged(trace, vllm_plus, True, monkeypatch)[2]
    own_ids = [page for in_anonymous_pool, page in ids if not in_anonymous_pool]
    assert own_ids and ANONYMOUS_ID not in own_ids
    freed: list = []

    def observed_run(trace, config):
        observe = lambda bus: bus.subscribe(SlotsFreed, lambda event: freed.extend(event.ids))  # noqa: E731
        return run_timed(trace, build(config), observe=observe)

    ids = run_logged(trace, replace(config, mode="timed"), True, monkeypatch, run=observed_run)[2]
    own_ids = [page for in_anonymous_pool, page in ids if not in_anonymous_pool]
    assert len(own_ids) > 1_000 and ANONYMOUS_ID not in own_ids and len(set(own_ids)) > 100
    assert len(set(freed)) > 100 and ANONYMOUS_ID not in freed
