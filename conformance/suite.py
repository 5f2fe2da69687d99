"""Run a set of seeded scenarios through an engine's own code and through ``simulate``; tabulate agreement.

``run_suite(engine, seeds, pressures, presets)`` -> ``SuiteResult``: per (preset, mode, pressure) the scenarios
and requests compared and how many agree, every disagreement, and the scenarios the engine rejects up front
(with its reason). ``python cli.py conformance ENGINE`` prints ``report(result)``.
"""

from __future__ import annotations

import importlib
import time
from collections import Counter
from dataclasses import dataclass, field

from conformance.compare import MODES, Disagreement, disagreements
from conformance.engine_runs import engine_run
from conformance.generate import generate
from conformance.scenario import Scenario

ENGINES = ("sglang", "freetoken", "vllm")
# the drivers with run_steps: their scheduler with many requests in flight
CONCURRENT = ("freetoken", "vllm", "sglang")


class EngineMissing(RuntimeError):
    """The engine's package is not installed (the conformance extras are not)."""


@dataclass
class SuiteResult:
    engine: str
    counts: Counter = field(default_factory=Counter)  # (preset, mode, pressure, "requests"|"equal"|...) -> n
    found: list[tuple[Scenario, str, Disagreement]] = field(default_factory=list)
    rejected: list[tuple[Scenario, str]] = field(default_factory=list)
    engine_seconds: float = 0.0
    sim_seconds: float = 0.0

    @property
    def all_equal(self) -> bool:
        return not self.found


def driver(engine: str, concurrent: bool = False):
    """The engine's conformance driver; ``concurrent``: one that runs its scheduler with many requests in
    flight (``run_steps``)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    hint = (
        f"the {engine} conformance driver needs the engine installed: see docs/conformance.md "
        f"(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)"
    )
    try:
        module = importlib.import_module(f"conformance.engines.{engine}")
    except ImportError as e:
        raise EngineMissing(f"{hint}; {e}") from None
    missing = getattr(module, "missing", lambda: None)()
    if missing:
        raise EngineMissing(f"{hint}; {missing}")
    if concurrent and engine not in CONCURRENT:
        raise EngineMissing(
            f"the {engine} driver has no concurrent mode yet (--concurrent runs {', '.join(CONCURRENT)})"
        )
    return module


def run_suite(
    engine: str, seeds: range, pressures=(False, True), presets: tuple[str, ...] | None = None, modes=MODES
) -> SuiteResult:
    module = driver(engine)
    result = SuiteResult(engine)
    for pressure in pressures:
        for seed in seeds:
            scenario = generate(engine, seed, pressure)
            why = module.accepts(scenario.config)
            if why is not None:
                result.rejected.append((scenario, why))
                continue
            runs: dict = {}  # the engine's runs of this scenario, one per distinct run (engine_runs.run_as)
            for preset in presets or tuple(module.PRESETS):
                _check(module, scenario, preset, modes, result, runs)
    return result


def _check(module, scenario: Scenario, preset: str, modes, result: SuiteResult, runs: dict) -> None:
    started = time.perf_counter()
    theirs = engine_run(module, "run", scenario, preset, runs)
    result.engine_seconds += time.perf_counter() - started
    started = time.perf_counter()
    found = disagreements(scenario, preset, theirs, modes)
    result.sim_seconds += time.perf_counter() - started
    bad = Counter(d.mode for d in found)
    for mode in modes:
        key = (preset, mode, scenario.pressure)
        result.counts[key + ("scenarios",)] += 1
        result.counts[key + ("scenarios_equal",)] += bad[mode] == 0
        result.counts[key + ("requests",)] += len(theirs)
        result.counts[key + ("equal",)] += len(theirs) - bad[mode]
    result.found += [(scenario, preset, d) for d in found]


def report(result: SuiteResult) -> str:
    rows = [
        f"conformance: {result.engine} (engine {result.engine_seconds:.1f} s, simulate "
        f"{result.sim_seconds:.1f} s)",
        f"{'preset':<18} {'mode':<7} {'pressure':<9} {'scenarios equal':>16} {'requests equal':>16}",
    ]
    keys = sorted({k[:3] for k in result.counts}, key=lambda k: (k[0], k[2], k[1]))
    for preset, mode, pressure in keys:
        c = {
            name: result.counts[(preset, mode, pressure, name)]
            for name in ("scenarios", "scenarios_equal", "requests", "equal")
        }
        rows.append(
            f"{preset:<18} {mode:<7} {'yes' if pressure else 'no':<9} "
            f"{c['scenarios_equal']:>7} / {c['scenarios']:<6} {c['equal']:>7} / {c['requests']:<6}"
        )
    if result.rejected:
        reasons = Counter(why for _, why in result.rejected)
        rows.append(
            f"{len(result.rejected)} scenario(s) the engine rejects up front: "
            + "; ".join(f"{n} x {why}" for why, n in reasons.most_common(3))
        )
    if result.found:
        rows += ["", smallest_disagreement(result)]
    return "\n".join(rows)


def smallest_disagreement(result: SuiteResult) -> str:
    """The disagreeing scenario with the fewest tokens, ready to rerun."""

    def size(item) -> int:
        trace = item[0].trace()
        return sum(trace.prompt_len(r.id) + r.output_len for r in trace)

    scenario, preset, _ = min(result.found, key=size)
    lines = [
        f"smallest disagreement: {scenario.name} ({preset}); rerun with "
        f"--seed {scenario.seed} --scenarios 1{' --pressure' if scenario.pressure else ''} --preset {preset}",
        f"  config: {scenario.config}",
    ]
    for s, p, d in result.found:
        if s is scenario and p == preset:
            lines.append(
                f"  {d.request_id} [{d.mode}]: engine {d.engine.cached_tokens}"
                f"{'' if d.engine.served else ' (not served)'}, simulate {d.simulated.cached_tokens}"
                f"{'' if d.simulated.served else ' (not served)'}"
            )
    lines += ["  trace:"] + [f"    {line}" for line in scenario.trace_lines]
    return "\n".join(lines)
