"""SGLang's admission and memory budget in the simulator (sim/cache/engines/sglang_admission.py): simulate answers
what SGLang 0.5.23 answered on hand-made and generated pressure scenarios (tests/sglang_budget_scenarios.py), and
the manager-level rules behind it (the allocators' page of slack, the copy-on-write slot of a refused hit, a lone
request given up on at once) hold on hand-checked states."""
from __future__ import annotations

import pytest

from conformance.compare import simulated
from conformance.generate import generate
from sim.cache.components import Component
from sim.cache.engines.sglang import SGLangRules
from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes
from sim.cache.solo_run import run_alone
from tests import sglang_budget_scenarios as hand
from tests.cache_helpers import hybrid_model, manager, out, seq

MODES = ("replay", "timed")


def outcomes(scenario, preset: str, mode: str) -> list[tuple[int, bool]]:
    return [(o.cached_tokens, o.served) for o in simulated(scenario, preset, mode).values()]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("swa_tokens", sorted(hand.LOCKED_WINDOW))
def test_the_window_a_match_locks_can_make_an_idle_server_wait(swa_tokens, mode):
    scenario = hand.locked_window(swa_tokens)
    assert outcomes(scenario, "sglang", mode) == hand.LOCKED_WINDOW[swa_tokens]
    if swa_tokens == 176:  # 80 SWA tokens needed, 176 - 96 = 80 obtainable: not strictly below
        note = simulated(scenario, "sglang", mode)["b"].note
        assert "PrefillAdder answers NO_TOKEN" in note and "needs 80 SWA tokens, at most 80 can be freed" in note


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("swa_tokens", sorted(hand.DECODE_CHECK))
def test_check_decode_mem_runs_before_the_decode_free(swa_tokens, mode):
    scenario = hand.decode_check(swa_tokens)
    assert outcomes(scenario, "sglang", mode) == hand.DECODE_CHECK[swa_tokens]
    if swa_tokens == 176:
        note = simulated(scenario, "sglang", mode)["a"].note
        assert "check_decode_mem" in note and "position 176" in note if mode == "timed" else "check_decode_mem" in note


@pytest.mark.parametrize("mode", MODES)
def test_the_budget_refuses_before_the_mamba_slots_are_taken(mode):
    assert outcomes(hand.budget_before_states(), "sglang", mode) == hand.BUDGET_BEFORE_STATES


@pytest.mark.parametrize("seed", sorted(hand.RESOLVED_SEEDS))
def test_pressure_seeds_answer_as_sglang_did(seed):
    scenario = generate("sglang", seed, pressure=True)
    for preset, expected in zip(hand.PRESETS, hand.RESOLVED_SEEDS[seed], strict=True):
        for mode in MODES:
            assert outcomes(scenario, preset, mode) == expected, (preset, mode)


FULL_ONLY = hybrid_model(swa=False, mamba=False)


def test_a_decode_step_without_a_page_still_evicts_for_the_page_of_slack():
    # alloc_paged_token_slots_decode evicts for a page per request at every step, needed or not
    mgr = manager("sglang", FULL_ONLY, PoolSizes(40, 0, 0), page_size=4, track_interval=4)
    for i in range(8):  # 8 leaves of 4 pages, 8 pages free
        run_alone(mgr, f"r{i}", seq((f"p{i}", 16)) + out(f"r{i}", 1), 16, 1, 64)
    mgr.admit("x", seq(("x", 28)) + out("x", 3), 28)
    mgr.prepare_prefill("x", 28, 0)  # 7 pages and one of slack: 8 free, nothing evicted
    mgr.complete_prefill("x", 28)
    mgr.settle("x", 0)  # the overlap loop processes the prefill's result: x commits its prompt
    assert mgr.pools[Component.FULL].num_free == 1 and mgr.tree.num_full_pages == 32 + 7
    assert mgr.plain_decode_steps(mgr.requests["x"], 0) == 0  # position 28 starts a page
    mgr.prepare_decode("x", 0)
    mgr.complete_decode("x")
    assert mgr.pools[Component.FULL].num_free == 0
    assert mgr.plain_decode_steps(mgr.requests["x"], 1) == 0  # no page to take, but none is free
    mgr.prepare_decode("x", 1)  # position 29: the least recent leaf goes
    assert mgr.pools[Component.FULL].num_free == 4 and mgr.tree.num_full_pages == 28 + 7
    mgr.check_integrity()


def test_a_refused_mamba_hit_still_makes_room_for_its_state_copy():
    # MambaComponent.finalize_match_result_in_cache copies the hit's state into a slot of the request's own
    # when the match is made, before PrefillAdder refuses it: with no slot free, the least recent tree state goes
    mgr = manager("sglang", hybrid_model(window=64, mamba_chunk=16), PoolSizes(400, 10, 8), page_size=16,
                  track_interval=64, chunked_prefill_size=128)
    for name in ("r1", "r2"):  # done at their prompt: each leaves [0, 64) live with the state at 64
        run_alone(mgr, name, seq((name, 70)) + out(name, 1), 70, 1, 128)
    assert mgr.tree.num_states == 2 and mgr.tree.num_swa_pages == 8
    states = mgr.pools[Component.MAMBA]
    held = states.alloc(states.num_free)  # as if running requests held every free slot
    mgr.begin_pass()  # a new PrefillAdder
    refusal = mgr.admit("b", seq(("r2", 70), ("v", 100)) + out("b", 8), 170)
    # 106 tokens to extend, 112 paged, chunks of 128: (112 - 64) + min(112 + 8, 64) + 16 = 128 SWA tokens; the
    # pool's 160 less r2's locked window (64) leaves 96: SGLang waits
    assert isinstance(refusal, Refusal) and (refusal.pool, refusal.needed, refusal.available) == ("SWA", 128, 96)
    # r1's state made room for the copy
    assert mgr.tree.num_states == 1 and mgr.pools[Component.MAMBA].num_free == 1
    assert mgr.match(seq(("r1", 70), ("y", 5)), 75).cached_len == 0
    assert mgr.match(seq(("r2", 70), ("y", 5)), 75).cached_len == 64
    mgr.pools[Component.MAMBA].free(held)
    mgr.check_integrity()


@pytest.mark.parametrize("requeues, expected", [(False, "stalled mid prefill"),
                                                (True, "stalled mid prefill")])
def test_a_lone_chunked_request_no_pass_continues_is_given_up_on(monkeypatch, requeues, expected):
    # SGLang's scheduler (sim/sched/sglang.py): the lone chunked prefill no pass backs waits forever in SGLang,
    # whatever the default loop's requeue rule says; simulate gives up on it
    from sim.engines.registry import make_policy
    from sim.models import get_model
    from sim.run.backend import FixedStepBackend
    from sim.run.setup import RunSetup
    from sim.run.simulate import SimConfig, run_timed
    from tests.test_engine import req, trace_of

    monkeypatch.setattr(SGLangRules, "requeues_lone_request", requeues)
    knobs = dict(page_size=16, track_interval=128, chunked_prefill_size=16)
    config = SimConfig(policy="sglang-retain", model="inkling", mode="timed", knobs=knobs)
    setup = RunSetup(config, get_model("inkling"), make_policy("sglang-retain", **knobs), PoolSizes(12500, 100, 16))
    result = run_timed(trace_of(req("long", 3000, 4, arrival=0.0)), setup, backend=FixedStepBackend(0.01, 0.0))
    assert result.requests.set_index("id").loc["long", "rejected"].startswith(expected)
