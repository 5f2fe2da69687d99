"""Engine modes forced on every scenario of a step-clock run (``cli.py conformance ENGINE --concurrent
--no-overlap``, ``--schedule-policy lpm``, ``--mixed-chunk``, ``--no-cache``): the generator draws each seed's
scenario as always (its rng streams untouched, so a seed gives the same requests and pools in every mode) and
the chosen knobs then replace what it drew. ``overlap`` is every engine's loop knob (SGLang's and FreeToken's
overlap scheduler, vLLM's async scheduling); the others are SGLang's (``disable_radix_cache``: its
``--disable-radix-cache``, compared with the sim's ``no-cache`` preset).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from conformance.scenario import EngineConfig, Scenario

SGLANG_ONLY = ("schedule_policy", "mixed_chunk", "disable_radix_cache")

Make = Callable[[str, int, bool], Scenario]


def forced(make: Make, engine: str, overrides: dict[str, Any]) -> Make:
    """``make`` with ``overrides`` (EngineConfig fields; None: as drawn) replacing the drawn knobs."""
    given = {name: value for name, value in overrides.items() if value is not None}
    wrong = [name for name in given if name in SGLANG_ONLY and engine != "sglang"]
    if wrong:
        flags = ", ".join("--" + name.replace("_", "-") for name in wrong)
        raise ValueError(f"{flags}: only SGLang has this knob, not {engine}")
    if not given:
        return make

    def make_forced(engine: str, seed: int, pressure: bool) -> Scenario:
        scenario = make(engine, seed, pressure)
        return replace(scenario, config=replace(scenario.config, **given))

    return make_forced


def rerun_flags(config: EngineConfig) -> str:
    """The options that force ``config``'s modes again (empty for the engines' defaults)."""
    flags = []
    if not config.overlap:
        flags.append(" --no-overlap")
    if config.schedule_policy != "fcfs":
        flags.append(f" --schedule-policy {config.schedule_policy}")
    if config.mixed_chunk:
        flags.append(" --mixed-chunk")
    if config.disable_radix_cache:
        flags.append(" --no-cache")
    return "".join(flags)
