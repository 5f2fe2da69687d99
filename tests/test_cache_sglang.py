"""SGLang's worked example (SPEC section 7, S1), as SGLang 0.5.23's own code does it."""
from __future__ import annotations

import pytest

from sim.cache.solo_run import run_alone
from tests.cache_helpers import hybrid_model, manager, out, seq

PROMPT, OUTPUT = 3000, 1024


def second_turn_match(policy: str, model=None, **knobs):
    mgr = manager(policy, model, chunked_prefill_size=16384, **knobs)
    prompt = seq(("p", PROMPT))
    run_alone(mgr, "a", prompt + out("a", OUTPUT), PROMPT, OUTPUT, 16384)
    mgr.check_integrity()
    turn2 = prompt + out("a", OUTPUT) + seq(("x", 1))
    return mgr, mgr.match(turn2, len(turn2))


@pytest.mark.parametrize("policy, interval, expected", [
    ("sglang", 256, 2944), ("sglang-retain", 256, 3840), ("sglang-retain-tree", 256, 3840),
    ("sglang", 512, 2944), ("sglang-retain", 512, 3584),
])
def test_worked_example_match(policy, interval, expected):
    _, match = second_turn_match(policy, page_size=128, track_interval=interval)
    assert match.cached_len == expected
    assert match.full_depth == (3840 if interval == 256 else 3584)
    assert match.blocked == match.full_depth - expected


@pytest.mark.parametrize("policy, frontier", [("sglang", 3456), ("sglang-retain", 3328)])
def test_worked_example_frontier(policy, frontier):
    mgr = manager(policy, chunked_prefill_size=16384, page_size=128, track_interval=256)
    prompt = seq(("p", PROMPT))
    tokens = prompt + out("a", OUTPUT)
    mgr.admit("a", tokens, PROMPT)
    mgr.prepare_prefill("a", PROMPT, 0)
    mgr.complete_prefill("a", PROMPT)
    mgr.settle("a", 0)  # the overlap loop processes the prefill's result: its commit
    assert mgr.requests["a"].swa_frontier == 2304  # floor128(2943 - 512) at the prefill commit
    for step in range(OUTPUT - 1):
        mgr.prepare_decode("a", 1 + step)
        mgr.complete_decode("a")
    assert mgr.requests["a"].swa_frontier == frontier
    assert mgr.requests["a"].checkpoint[0] == 3840
    mgr.check_integrity()


@pytest.mark.parametrize("policy", ["sglang", "sglang-retain"])
def test_swa_only_model_matches_page_floor_of_committed_tokens(policy):
    _, match = second_turn_match(policy, hybrid_model(mamba=False), page_size=128, track_interval=256)
    assert match.cached_len == 3968


@pytest.mark.parametrize("page, expected_phases", [(128, 73), (64, 9)])
def test_iterations_trigger_depends_on_phase(page, expected_phases):
    hits = sum(
        second_turn_match("sglang", page_size=page, track_interval=256, swa_free_trigger="iterations",
                          iteration_phase=phase)[1].cached_len == 3840
        for phase in range(128))
    assert hits == expected_phases


def test_iterations_trigger_never_reaches_interval_512_checkpoint():
    for phase in range(0, 128, 7):
        _, match = second_turn_match("sglang", page_size=128, track_interval=512, swa_free_trigger="iterations",
                                     iteration_phase=phase)
        assert match.cached_len == 2944


def test_retain_costs_at_most_one_interval_of_extra_swa():
    plain, _ = second_turn_match("sglang", page_size=128, track_interval=256)
    kept, _ = second_turn_match("sglang-retain", page_size=128, track_interval=256)
    extra = kept.tree.num_swa_pages - plain.tree.num_swa_pages
    assert 0 < extra * 128 <= 256


def test_no_cache_and_radix_baselines():
    _, none = second_turn_match("no-cache", page_size=128)
    _, radix = second_turn_match("radix", page_size=128)
    assert none.cached_len == 0
    assert radix.cached_len == 3968  # FULL only: every committed page


def test_reference_catches_the_deliberately_broken_policy():
    from tests.cache_reference import reference_match

    mgr, match = second_turn_match("broken-retain-short", page_size=128, track_interval=256)
    turn2 = seq(("p", PROMPT)) + out("a", OUTPUT) + seq(("x", 1))
    assert match.cached_len == 3840 and match.relies_on_freed_window
    assert reference_match(mgr, turn2, len(turn2))[0] == match.sound_len == 2944
