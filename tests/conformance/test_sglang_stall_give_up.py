"""SGLang 0.5.23's own scheduler on a chunked prefill that stalls (tests/sglang_stall_scenarios.py): the
step driver gives up on it after the one idle pass, as ``simulate`` does, so the waiting-prefix refresh
(``_touch_waiting_prefixes``, every 32nd pass) runs no more often in SGLang than in the simulator, and every
step agrees. Skipped when sglang is not installed."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.compare_steps import simulated_steps
from conformance.engines import sglang as driver
from conformance.trajectory import first_difference
from tests import sglang_stall_scenarios as hand

pytestmark = pytest.mark.skipif(
    find_spec("sglang") is None,
    reason="sglang 0.5.23 is not installed "
    "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)",
)


def test_a_stalled_chunk_is_given_up_on_after_one_idle_pass_and_simulate_agrees():
    scenario = hand.stalled_chunk()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps if 8 <= step.at <= 12] == hand.STEPS
    assert len(run.steps) == hand.NUM_STEPS
    outcomes = {name: (s.cached_tokens, s.served, s.finished_at) for name, s in run.requests.items()}
    assert outcomes == hand.OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None
