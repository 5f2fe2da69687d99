"""SGLang 0.5.23's own scheduler on hand-made scenarios pinned with its recorded steps, and ``simulate``
agreeing at every step:

- a chunked prefill that stalls (tests/sglang_stall_scenarios.py): the step driver gives up on it after the
  one idle pass, as ``simulate`` does, so the waiting-prefix refresh (``_touch_waiting_prefixes``, every
  32nd pass) runs no more often in SGLang than in the simulator;
- a retracted request re-admitted beside another one (tests/sglang_retraction_scenarios.py): the pass is
  charged its whole ``max_new_tokens``.

Skipped when sglang is not installed.
"""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.compare_steps import simulated_steps
from conformance.engines import sglang as driver
from conformance.trajectory import first_difference
from tests import sglang_retraction_scenarios, sglang_stall_scenarios

pytestmark = pytest.mark.skipif(
    find_spec("sglang") is None,
    reason="sglang 0.5.23 is not installed "
    "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)",
)


def _run_pinned(hand, scenario, first_at: int, last_at: int):
    """SGLang's run of ``scenario``: its steps ``first_at``..``last_at``, step count and outcomes as ``hand``
    recorded them, and ``simulate`` equal at every step."""
    run = driver.run_steps(scenario, "sglang")
    assert [
        (step.at, step.batch, step.pools) for step in run.steps if first_at <= step.at <= last_at
    ] == hand.STEPS
    assert len(run.steps) == hand.NUM_STEPS
    outcomes = {name: (s.cached_tokens, s.served, s.finished_at) for name, s in run.requests.items()}
    assert outcomes == hand.OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None
    return run


def test_a_stalled_chunk_is_given_up_on_after_one_idle_pass_and_simulate_agrees():
    _run_pinned(sglang_stall_scenarios, sglang_stall_scenarios.stalled_chunk(), 8, 12)


def test_a_replayed_request_is_charged_its_whole_decode_and_simulate_agrees():
    hand = sglang_retraction_scenarios
    run = _run_pinned(hand, hand.replayed_outputs(), 410, 413)
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.RETRACTED
