"""A retracted request re-admitted by SGLang charges the pass its whole ``max_new_tokens``, outputs already
made included (``_select_prefill_admission``), so a request behind it waits a step (pinned with SGLang
0.5.23's answer on the hand-made scenario of tests/sglang_retraction_scenarios.py; tests/conformance runs
SGLang again).
"""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from tests import sglang_retraction_scenarios as hand


def test_a_replayed_request_is_charged_its_whole_decode_as_sglang_charges_it():
    run = simulated_steps(hand.replayed_outputs(), "sglang")
    assert [(step.at, step.batch, step.pools) for step in run.steps if 410 <= step.at <= 413] == hand.STEPS
    assert [(step.at, step.retracted) for step in run.steps if step.retracted] == hand.RETRACTED
    assert len(run.steps) == hand.NUM_STEPS
    outcomes = {name: (s.cached_tokens, s.served, s.finished_at) for name, s in run.requests.items()}
    assert outcomes == hand.OUTCOMES
