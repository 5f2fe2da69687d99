"""One engine run per distinct run: a scenario's presets that change nothing in the engine share its run.

A preset differs from its engine's default by one replaced method (SGLang's ``swa_retain_floor``, FreeToken's
``trim_head_swa``); on a configuration where the replacement changes nothing the two presets execute the same
code on the same input, so their runs are one. A driver's ``run_as(config, preset)`` names the preset whose run
``preset``'s is (drivers without it: every preset its own run), and checks its premise on the engine it builds.
The suites compare every preset's run with ``simulate`` as before; only the engine's second identical run goes.
"""

from __future__ import annotations

from conformance.scenario import Scenario
from conformance.trajectory import EngineCorrupt


def run_as(module, scenario: Scenario, preset: str) -> str:
    """The preset whose engine run stands for ``preset``'s on this scenario."""
    same = getattr(module, "run_as", None)
    return preset if same is None else same(scenario.config, preset)


def engine_run(module, function: str, scenario: Scenario, preset: str, runs: dict):
    """``module.function(scenario, preset)``, or the run already in ``runs`` (one scenario's runs, by
    ``run_as``) that stands for it; an ``EngineCorrupt`` it raised is raised again."""
    key = run_as(module, scenario, preset)
    if key not in runs:
        try:
            runs[key] = getattr(module, function)(scenario, key)
        except EngineCorrupt as error:
            runs[key] = error
    outcome = runs[key]
    if isinstance(outcome, EngineCorrupt):
        raise outcome
    return outcome
