"""The concurrent check: seeded scenarios with many requests in flight, through an engine's own scheduler and
through ``simulate`` on a step clock, compared step by step (``trajectory.first_difference``).

``run_concurrent(engine, seeds, pressures, presets)`` -> ``StepsResult``: per (preset, pressure) the scenarios,
steps and requests compared and how many agree; every disagreement with its first differing step; the
scenarios the engine refuses up front or corrupts its own state on (a page freed twice), with the reason.
``python cli.py conformance ENGINE --concurrent`` prints ``report_steps``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from conformance.compare_steps import simulated_steps
from conformance.engine_runs import engine_run
from conformance.generate_concurrent import generate_concurrent
from conformance.modes import rerun_flags
from conformance.scenario import Scenario
from conformance.trajectory import Difference, EngineCorrupt, Trajectory, first_difference, same_outcome


@dataclass
class StepsResult:
    engine: str
    counts: Counter = field(default_factory=Counter)  # (preset, pressure, name) -> n
    found: list[tuple[Scenario, str, Difference]] = field(default_factory=list)
    rejected: list[tuple[Scenario, str]] = field(default_factory=list)
    corrupt: list[tuple[Scenario, str, str]] = field(default_factory=list)  # (scenario, preset, why)
    corrupt_steps: int = 0  # the corrupt runs' steps before the engine broke, compared with simulate's
    corrupt_steps_equal: int = 0
    corrupt_found: list[tuple[Scenario, str, Difference]] = field(default_factory=list)
    engine_seconds: float = 0.0
    sim_seconds: float = 0.0

    @property
    def all_equal(self) -> bool:
        return not self.found


def run_concurrent(
    module, seeds: range, pressures=(False, True), presets=None, make=generate_concurrent
) -> StepsResult:
    """``module``: the engine's driver (``conformance.suite.driver``), which offers ``run_steps``; ``make``:
    the scenarios' generator (``generate_concurrent``, or ``spaced.generate_spaced``: one at a time)."""
    result = StepsResult(module.ENGINE)
    for pressure in pressures:
        for seed in seeds:
            scenario = make(module.ENGINE, seed, pressure)
            why = module.accepts(scenario.config)
            if why is not None:
                result.rejected.append((scenario, why))
                continue
            runs: dict = {}  # the engine's runs of this scenario, one per distinct run (engine_runs.run_as)
            for preset in presets or presets_of(module, scenario):
                _check(module, scenario, preset, result, runs)
    return result


def presets_of(module, scenario: Scenario) -> tuple[str, ...]:
    """The presets a scenario's engine run stands for: the driver's ``presets_for(config)`` where it has one
    (SGLang: ``no-cache`` alone under ``--disable-radix-cache``), else every preset it models."""
    presets_for = getattr(module, "presets_for", None)
    return tuple(module.PRESETS) if presets_for is None else presets_for(scenario.config)


def _check(module, scenario: Scenario, preset: str, result: StepsResult, runs: dict) -> None:
    started = time.perf_counter()
    try:
        theirs = engine_run(module, "run_steps", scenario, preset, runs)
    except EngineCorrupt as error:
        result.corrupt.append((scenario, preset, str(error)))
        _check_before_corrupt(scenario, preset, error, result)
        return
    finally:
        result.engine_seconds += time.perf_counter() - started
    started = time.perf_counter()
    mine = simulated_steps(scenario, preset)
    result.sim_seconds += time.perf_counter() - started
    difference = first_difference(theirs, mine)
    key = (preset, scenario.pressure)
    result.counts[key + ("scenarios",)] += 1
    result.counts[key + ("scenarios_equal",)] += difference is None
    result.counts[key + ("steps",)] += len(theirs.steps)
    result.counts[key + ("steps_equal",)] += _steps_before(theirs, difference)
    result.counts[key + ("requests",)] += len(theirs.requests)
    result.counts[key + ("requests_equal",)] += sum(
        same_outcome(theirs.requests[r], mine.requests[r]) for r in theirs.requests
    )
    if difference is not None:
        result.found.append((scenario, preset, difference))


def _check_before_corrupt(scenario: Scenario, preset: str, error: EngineCorrupt, result: StepsResult) -> None:
    """The steps the engine ran before its broken state showed, compared with simulate's first as many. A
    difference there is reported apart, not failed: a page freed twice shows at its second free, while the
    first, wrong one (a page freed that a request still holds) already changed the pool counts."""
    if not error.steps:
        return
    started = time.perf_counter()
    mine = simulated_steps(scenario, preset)
    result.sim_seconds += time.perf_counter() - started
    theirs = Trajectory(error.steps, {})
    difference = first_difference(theirs, Trajectory(mine.steps[: len(error.steps)], {}))
    result.corrupt_steps += len(error.steps)
    result.corrupt_steps_equal += _steps_before(theirs, difference)
    if difference is not None:  # the engine's first wrong free may come steps before the second one shows it
        result.corrupt_found.append((scenario, preset, difference))


def _steps_before(theirs: Trajectory, difference: Difference | None) -> int:
    """Steps that agree: all of them, or those before the first difference."""
    if difference is None or difference.at is None:
        return len(theirs.steps)
    return sum(step.at < difference.at for step in theirs.steps)


def report_steps(result: StepsResult) -> str:
    rows = [
        f"conformance: {result.engine}, concurrent, step clock (engine {result.engine_seconds:.1f} s, simulate "
        f"{result.sim_seconds:.1f} s)",
        f"{'preset':<18} {'pressure':<9} {'scenarios equal':>16} {'steps equal':>18} {'requests equal':>16}",
    ]
    for preset, pressure in sorted({k[:2] for k in result.counts}, key=lambda k: (k[0], k[1])):
        c = {name: result.counts[(preset, pressure, name)] for name in _NAMES}
        rows.append(
            f"{preset:<18} {'yes' if pressure else 'no':<9} {c['scenarios_equal']:>7} / {c['scenarios']:<6} "
            f"{c['steps_equal']:>8} / {c['steps']:<7} {c['requests_equal']:>7} / {c['requests']:<6}"
        )
    if result.rejected:
        reasons = Counter(why for _, why in result.rejected)
        rows.append(
            f"{len(result.rejected)} scenario(s) the engine rejects up front: "
            + "; ".join(f"{n} x {why}" for why, n in reasons.most_common(3))
        )
    if result.corrupt:
        scenario, preset, why = result.corrupt[0]
        equal, compared = result.corrupt_steps_equal, result.corrupt_steps
        rows.append(
            f"{len(result.corrupt)} scenario run(s) where the engine corrupts its own state, compared only up to "
            f"it ({equal} / {compared} steps before equal; first: {scenario.name} ({preset}): {why})"
        )
    if result.corrupt_found:
        scenario, preset, difference = result.corrupt_found[0]
        rows.append(
            f"{len(result.corrupt_found)} of them differ before the engine's break shows (first: {scenario.name} "
            f"({preset}) {difference.describe()})"
        )
    if result.found:
        rows += ["", smallest_step_difference(result)]
    return "\n".join(rows)


def _family(kind: str) -> str:
    """The CLI flag that regenerates a scenario of this kind."""
    return next((f for f in ("spaced", "boundary") if kind.startswith(f)), "concurrent")


_NAMES = ("scenarios", "scenarios_equal", "steps", "steps_equal", "requests", "requests_equal")


def smallest_step_difference(result: StepsResult) -> str:
    """The differing scenario with the fewest tokens, its first differing step, ready to rerun."""

    def size(item) -> int:
        trace = item[0].trace()
        return sum(trace.prompt_len(r.id) + r.output_len for r in trace)

    scenario, preset, difference = min(result.found, key=size)
    lines = [
        f"smallest disagreement: {scenario.name} ({preset}); rerun with python cli.py conformance "
        f"{scenario.engine} --{_family(scenario.kind)} "
        f"--seed {scenario.seed} --scenarios 1"
        f"{' --pressure' if scenario.pressure else ' --no-pressure'} --preset {preset}{rerun_flags(scenario.config)}",
        f"  first difference: {difference.describe()}",
        f"  config: {scenario.config}",
        "  trace:",
    ]
    return "\n".join(lines + [f"    {line}" for line in scenario.trace_lines])
