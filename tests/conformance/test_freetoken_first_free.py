"""FreeToken 0.2.1's first wrong free, found in the step that does it (``conformance/engines/freetoken_audit.py``).

The hand-made ``double_free`` scenario (tests/freetoken_concurrent_scenarios.py) on FreeToken's own loop and
cache, and frees planted into runs that are otherwise right. Skipped when FreeToken is not installed.
"""

from __future__ import annotations

import pytest

from conformance import isolated
from conformance.engines import freetoken
from conformance.trajectory import EngineCorrupt
from tests import freetoken_concurrent_scenarios as hand

pytestmark = [
    pytest.mark.skipif(
        freetoken.installed_version() is None,
        reason="FreeToken is not installed: pip install --no-deps -c constraints-cpu.txt "
        "-r conformance/requirements.txt",
    ),
    pytest.mark.filterwarnings("ignore:Triton is not supported on current platform"),
]


def test_the_first_wrong_free_is_found_in_the_step_that_does_it():
    # c's prompt commit frees its 909 copies of the shared prefix as duplicates, and its re-match stops short,
    # so its page table keeps naming them: found there, in the siblings' first step, with who freed them
    with pytest.raises(EngineCorrupt) as raised:
        freetoken.run_steps(hand.double_free(), "freetoken")
    message = str(raised.value)
    assert "909 KV page(s) still in use" in message and "request c's page table" in message
    assert "freed by CacheManager._cache_req_swa, by step 0" in message
    assert raised.value.at == 0 and raised.value.steps == ()


def test_the_second_free_shows_17_steps_later():
    # without the audit only the free list's duplicates show the break: c's finish frees the pages again
    message, at, num_steps = _beside("without_audit", 0)
    assert "freed 909 KV page(s) twice by step 17" in message and (at, num_steps) == (17, 17)


def test_the_steps_before_the_first_wrong_free_agree_with_simulate():
    # a stranger decodes alone for 3 steps, then the siblings arrive: the wrong free is in step 3, and the 3
    # steps before it are compared and equal
    from conformance.suite_steps import StepsResult, _check

    result = StepsResult("freetoken")
    _check(freetoken, hand.double_free(lead=3), "freetoken", result, {})
    [(_, _, why)] = result.corrupt
    assert "request c's page table" in why and why.endswith("by step 3")
    assert (result.corrupt_steps, result.corrupt_steps_equal, result.corrupt_found) == (3, 3, [])


def test_a_difference_before_the_engine_breaks_is_found(monkeypatch):
    # a planted mistake in simulate's first step: found, though the engine's run ends in its wrong free
    from conformance import suite_steps

    def off_by_one(scenario, preset):
        run = simulate_steps(scenario, preset)
        first = run.steps[0]
        return run._replace(steps=(first._replace(batch=first.batch[:-1]),) + run.steps[1:])

    simulate_steps = suite_steps.simulated_steps
    monkeypatch.setattr(suite_steps, "simulated_steps", off_by_one)
    result = suite_steps.StepsResult("freetoken")
    suite_steps._check(freetoken, hand.double_free(lead=3), "freetoken", result, {})
    assert [difference.what for _, _, difference in result.corrupt_found] == ["batch"]


def test_a_planted_free_of_a_live_requests_page_is_reported_at_its_step():
    message, at, num_steps = _beside("planted", "page", 2)
    assert "1 KV page(s) still in use" in message and "request a's page table" in message
    assert "freed by _page_free" in message and (at, num_steps) == (2, 2)


def test_a_planted_free_of_a_live_windows_swa_is_reported_at_its_step():
    # the full page stays held, only its SWA slot goes back: the window's map says so
    message, at, num_steps = _beside("planted", "swa", 1)
    assert "1 page(s)' SWA slots still in use" in message and "request z's window [0, 101)" in message
    assert "freed by _swa_free" in message and (at, num_steps) == (1, 1)


def test_a_planted_free_of_a_tree_page_no_request_holds_is_reported():
    # a finished request's prompt stays in the tree: its pages are the tree's alone
    message, at, num_steps = _beside("planted", "tree", 8)
    assert "1 KV page(s) still in use" in message and "named by the tree's node [" in message
    assert "freed by _tree_free" in message and num_steps == 8


def test_a_run_without_a_planted_free_is_not_broken():
    # the planting itself changes nothing unless it frees: siblings run to the end with the audit on
    assert _beside("planted", "none", 0) is None


def _beside(function: str, *args):
    """A function of tests/freetoken_planted_frees.py, run where FreeToken runs (tests/conformance/conftest.py)."""
    return isolated.call_beside(freetoken, "tests.freetoken_planted_frees", function, *args)
