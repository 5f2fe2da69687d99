"""SGLang 0.5.23's own scheduler re-admitting a retracted request beside another one
(tests/sglang_retraction_scenarios.py): the recorded steps, and ``simulate`` agrees at every step. Skipped
when sglang is not installed.
"""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.compare_steps import simulated_steps
from conformance.engines import sglang as driver
from conformance.trajectory import first_difference
from tests import sglang_retraction_scenarios as hand

pytestmark = pytest.mark.skipif(
    find_spec("sglang") is None,
    reason="sglang 0.5.23 is not installed (pip install --no-deps -c constraints-cpu.txt -r "
    "conformance/requirements.txt)",
)


def test_a_replayed_request_is_charged_its_whole_decode_and_simulate_agrees():
    scenario = hand.replayed_outputs()
    run = driver.run_steps(scenario, "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps if 410 <= step.at <= 413] == hand.STEPS
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.RETRACTED
    assert len(run.steps) == hand.NUM_STEPS
    outcomes = {name: (s.cached_tokens, s.served, s.finished_at) for name, s in run.requests.items()}
    assert outcomes == hand.OUTCOMES
    assert first_difference(run, simulated_steps(scenario, "sglang")) is None
