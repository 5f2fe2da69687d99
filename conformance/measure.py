"""Agreement of one engine's real cache code with ``simulate``, over seeded scenarios.

    python -m conformance.measure sglang --seeds 0-199 [--pressure both|yes|no] [--out FILE.jsonl]

Prints a table (scenarios, requests, requests equal, by mode / preset / pressure) and, with --out, one
JSON line per disagreement (seed, pressure, preset, mode, request, engine and simulated outcomes).
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import time
from collections import Counter
from contextlib import contextmanager

from conformance.compare import MODES, Disagreement, disagreements
from conformance.generate import generate
from conformance.scenario import EngineOutcome

SIM_LIMIT_S = 60  # a simulate run that has not ended by then is reported as a simulator timeout


@contextmanager
def _time_limit(seconds: int):
    def expire(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _write(out, row: dict) -> None:
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()


def _seeds(text: str) -> list[int]:
    """``0-199``, ``5,12,13`` or a mix."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


def measure(
    engine: str, seeds: list[int], pressures: list[bool], out, sim_limit_s: int = SIM_LIMIT_S
) -> Counter:
    driver = importlib.import_module(f"conformance.engines.{engine}")
    counts: Counter = Counter()
    for pressure in pressures:
        for seed in seeds:
            scenario = generate(engine, seed, pressure)
            if driver.accepts(scenario.config) is not None:
                counts["rejected", pressure] += 1
                continue
            for preset in driver.PRESETS:
                _measure_one(driver, scenario, preset, counts, out, sim_limit_s)
    return counts


def _measure_one(driver, scenario, preset: str, counts: Counter, out, sim_limit_s: int) -> None:
    started = time.perf_counter()
    try:
        result = driver.run(scenario, preset)
    except Exception as error:  # a crash or livelock of the engine's own loop is a finding, not a stop
        counts["errors"] += 1
        _write(
            out,
            {
                "seed": scenario.seed,
                "pressure": scenario.pressure,
                "kind": scenario.kind,
                "preset": preset,
                "error": f"{type(error).__name__}: {error}",
            },
        )
        return
    counts["engine_s"] += time.perf_counter() - started  # type: ignore[assignment]  # seconds beside counts
    counts["runs"] += 1
    found = []
    for mode in MODES:
        try:
            with _time_limit(sim_limit_s):
                found += disagreements(scenario, preset, result, modes=(mode,))
        except TimeoutError:  # the simulator's own loop did not end: a finding for the simulator
            counts["sim_timeouts", mode] += 1
            _write(
                out,
                {
                    "seed": scenario.seed,
                    "pressure": scenario.pressure,
                    "kind": scenario.kind,
                    "preset": preset,
                    "mode": mode,
                    "sim_error": f"no result within {sim_limit_s} s",
                },
            )
            found += [
                Disagreement(r, mode, o, EngineOutcome(-1, False, "timeout")) for r, o in result.items()
            ]
    for mode in MODES:
        key = (mode, preset, scenario.pressure)
        counts["requests", key] += len(result)
        counts["equal", key] += len(result) - sum(d.mode == mode for d in found)
        counts["scenarios", key] += 1
        counts["scenarios_equal", key] += not any(d.mode == mode for d in found)
    for d in found:
        _write(
            out,
            {
                "seed": scenario.seed,
                "pressure": scenario.pressure,
                "kind": scenario.kind,
                "preset": preset,
                "mode": d.mode,
                "request": d.request_id,
                "engine": list(d.engine),
                "simulated": list(d.simulated),
            },
        )


def table(counts: Counter, sim_limit_s: int = SIM_LIMIT_S) -> str:
    keys = sorted({k[1] for k in counts if isinstance(k, tuple) and k[0] == "requests"}, key=str)
    lines = [
        f"{'mode':7} {'preset':14} {'pressure':8} {'scenarios':>9} {'sc.equal':>8} {'requests':>8} {'equal':>6}"
    ]
    for mode, preset, pressure in keys:
        key = (mode, preset, pressure)
        lines.append(
            f"{mode:7} {preset:14} {str(pressure):8} {counts['scenarios', key]:9d} "
            f"{counts['scenarios_equal', key]:8d} {counts['requests', key]:8d} {counts['equal', key]:6d}"
        )
    rejected = {p: counts["rejected", p] for p in (False, True) if counts["rejected", p]}
    timeouts = {m: counts["sim_timeouts", m] for m in MODES if counts["sim_timeouts", m]}
    lines.append(f"simulator timeouts (> {sim_limit_s} s): {timeouts or 'none'}")
    lines.append(
        f"engine errors: {counts['errors']}; engine rejected (accepts): {rejected or 'none'}; "
        f"engine time {counts['engine_s'] / max(counts['runs'], 1):.3f} s/scenario over {counts['runs']} runs"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("engine")
    parser.add_argument("--seeds", default="0-199")
    parser.add_argument("--pressure", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--out")
    parser.add_argument("--sim-limit", type=int, default=SIM_LIMIT_S, help="seconds a simulate run may take")
    args = parser.parse_args(argv)
    pressures = {"both": [False, True], "yes": [True], "no": [False]}[args.pressure]
    out = open(args.out, "w") if args.out else None
    try:
        print(table(measure(args.engine, _seeds(args.seeds), pressures, out, args.sim_limit), args.sim_limit))
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
