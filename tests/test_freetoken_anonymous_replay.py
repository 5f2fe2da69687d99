"""FreeToken's replay runs on pools of anonymous page ids (``Engine.anonymous_manager``, switched by
``simulate.ANONYMOUS_IDS``): a replay's tables hold no page id, and no rule of FreeToken's reads one, so the
run must decide exactly as on pools handing out real ids. As a property over the generated FreeToken runs
(``test_freetoken_page_lists.page_cases``: SWA, SWA + GDN and GDN models, the three presets, short windows,
pages 1, 2, 16 and 64, bounds on and off, small pools), in replay: the run's tables and summary, every
allocation's pool and length, every tree's nodes as the run ends (span, FULL and SWA page counts, state,
stamp, locks), the pools' free counts and the eviction counts equal the reference's, a replay on real ids.
Fixed cases (the ``@example``s) hold floors on the anonymous path's use: it hands out anonymous ids by the
thousand, evicts, tombstones and revives. Timed runs: tests/test_freetoken_anonymous_timed.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from same_runs import same_both_ways
from test_freetoken_page_lists import page_cases

from sim.cache.components import Component
from sim.cache.pools import ANONYMOUS_ID
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn
from tests.anonymous_runs import run_logged as run_logged_with_pools


@pytest.fixture(autouse=True)
def per_node_tree(monkeypatch):
    """Real ids make no run nodes (a listed free's order is a node's), so the anonymous side makes none either
    here, whose trees are compared node by node: tests/test_run_nodes_property.py holds the runs to them."""
    monkeypatch.setattr("sim.cache.tree_runs.RUN_NODES", False)


def run_logged(trace, config, anonymous: bool, monkeypatch, run=simulate) -> tuple[list, object, list]:
    """``anonymous_runs.run_logged`` with the FULL and SWA ids alone (FreeToken has no throwaway caches)."""
    log, result, kv_ids = run_logged_with_pools(trace, config, anonymous, monkeypatch, run)
    return log, result, [page for _, page in kv_ids]


def assert_anonymous_run_equal(trace, config, monkeypatch) -> tuple[list, list]:
    """The two runs (the config's mode) equal; returns the anonymous one's log and FULL and SWA ids."""
    (anonymous_log, _, anonymous_ids), (_, _, real_ids) = same_both_ways(
        lambda anonymous: run_logged(trace, config, anonymous, monkeypatch)
    )
    assert set(anonymous_ids) <= {ANONYMOUS_ID}  # the switch did switch: no real id handed out
    assert ANONYMOUS_ID not in real_ids
    return anonymous_log, anonymous_ids


def _config(policy: str, model: str, pool_tokens: int, window: int) -> SimConfig:
    """Page 1, few states, a short window, pools the run fills."""
    knobs = dict(page_size=1, chunked_prefill_size=16, window=window)
    return SimConfig(
        policy=policy, model=model, knobs=knobs, pool_tokens=pool_tokens, mamba_states=12, bounds=False
    )


def _turns(seed: int):
    return multiturn(
        num_sessions=4, num_turns=6, system_len=300, user_len=100, output_len=100, think_time=0.2,
        request_rate=4.0, seed=seed,
    )  # fmt: skip


# (trace, config, floors: anonymous ids handed out, FULL evictions, tombstones as the run ends); in these
# replays the SWA pool never evicts (each request alone frees its SWA out of its window as it goes)
FIXED_CASES = [
    (_turns(1), _config("freetoken", "gemma-4-26b-a4b", 1_200, 32), (8_000, 8, 20)),
    (_turns(1), _config("freetoken-budget", "inkling", 1_500, 16), (10_000, 5, 20)),
    (
        fanout(num_groups=3, prompts_per_group=5, system_len=400, question_len=50, output_len=80, seed=3),
        _config("freetoken-lazy", "gemma-4-26b-a4b", 900, 32),
        (15_000, 40, 2),
    ),
    (  # SWA + GDN, a 128-token window: snapshots' commits free runs of SWA pages whose head was freed already
        # (``freetoken_frees.swa_live``'s mixed list), which the cases above never reach
        fanout(num_groups=2, prompts_per_group=5, system_len=600, question_len=50, output_len=80, seed=3),
        replace(
            _config("freetoken", "inkling", 2_500, 128),
            knobs=dict(page_size=1, chunked_prefill_size=64, window=128),
            mamba_states=24,
        ),
        (14_000, 8, 4),
    ),
]


@pytest.mark.interpreted  # patches Pool.alloc and a module flag, which the compiled core binds
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=page_cases())
@example(case=FIXED_CASES[0][:2])
@example(case=FIXED_CASES[1][:2])
@example(case=FIXED_CASES[2][:2])
@example(case=FIXED_CASES[3][:2])
def test_the_anonymous_replay_equals_the_replay_on_real_ids(case, monkeypatch):
    trace, config = case
    assert_anonymous_run_equal(trace, replace(config, mode="replay"), monkeypatch)  # refused: rejected


@pytest.mark.interpreted
@pytest.mark.parametrize("trace, config, floors", FIXED_CASES)
def test_the_fixed_replays_use_the_anonymous_pools_and_evict(trace, config, floors, monkeypatch):
    """A test of the fixed examples: their replays hand out anonymous ids by the thousand, evict (so that freed
    ids are handed out again) and leave tombstones (a replay that never reused a page would pass anything)."""
    log, ids = assert_anonymous_run_equal(trace, replace(config, mode="replay"), monkeypatch)
    num_ids, num_full_evictions, num_tombstones = floors
    assert len(ids) >= num_ids
    assert log[-1][2][Component.FULL] >= num_full_evictions
    assert sum(node[4] for node in log[-2]) >= num_tombstones
