"""One request at a time on the step clock (the ``spaced`` scenarios): a one-at-a-time scenario
(``generate.py``) whose requests arrive so far apart that each is served alone, through the engine's
concurrent driver and ``simulate`` on a step clock (``compare_steps``). Serving is what the one-at-a-time check
serves, but compared at every step: each step's batch (its chunks), the pools after it (free and tree-held
pages, blocks or states: what eviction, retention and release leave) and each request's finish step, not
only each request's cached tokens.
"""

from __future__ import annotations

import json
from dataclasses import replace

from conformance.generate import generate
from conformance.generate_boundary import generate_boundary
from conformance.generate_targeted import long_seeds
from conformance.scenario import Scenario

ENGINES = ("freetoken", "vllm", "sglang")
SPACING = 1 << 20  # steps between arrivals: more than any scenario's request needs, so each runs alone
# Open differences the spaced comparison found, each named with its first differing step: a case listed here
# is reported, not failed (tests/conformance/test_suite_agrees.py), and the mutation harness does not compare it
KNOWN: dict[tuple[str, int, bool], str] = {}  # none open (vLLM seed 19 with pressure was the last: fixed)


def spaced(scenario: Scenario) -> Scenario:
    """The scenario with request i arriving at step ``i * SPACING`` (an idle engine jumps to it)."""
    lines = []
    for index, line in enumerate(scenario.trace_lines):
        request = json.loads(line)
        request.pop("after", None)
        request.pop("think_time", None)
        request["arrival"] = index * SPACING
        lines.append(json.dumps(request, separators=(", ", ": ")))
    return replace(
        scenario, name=f"{scenario.name}-spaced", kind=f"spaced-{scenario.kind}", trace_lines=tuple(lines)
    )


def generate_spaced(engine: str, seed: int, pressure: bool = False) -> Scenario:
    """Seeds from ``generate_targeted.LONG_FROM`` on: the boundary family's 16k-32k-token prompts, spaced."""
    if seed in long_seeds(engine):
        return spaced(generate_boundary(engine, seed, pressure))
    return spaced(generate(engine, seed, pressure))
