"""Agreement of ``simulate`` with FreeToken's own cache code on generated scenarios.

    python -m conformance.measure_freetoken --seeds 200 [--out disagreements.jsonl]

For every seed, pressure off and on, both presets and both schedulers (overlap on, FreeToken's default, and
off), runs FreeToken and ``simulate`` (replay and timed) and prints, per (mode, preset, pressure, overlap):
the scenarios run, the requests, the requests whose cached tokens (and served flag) agree, and the
scenarios where every request agrees. ``--out`` writes each disagreement as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from conformance.compare import MODES, disagreements
from conformance.engines import freetoken
from conformance.generate import generate
from conformance.scenario import Scenario

SIM_LIMIT_S = 30  # a simulate run longer than this is stuck (it happens in timed mode; see the findings)


def scenarios(num_seeds: int, overlap: bool):
    for pressure in (False, True):
        for seed in range(num_seeds):
            scenario = generate(freetoken.ENGINE, seed, pressure)
            yield replace(scenario, config=replace(scenario.config, overlap=overlap))


def measure(num_seeds: int, out) -> dict:
    # per row: scenarios, requests, equal requests, scenarios all equal, scenarios the simulator never ended
    table: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    rejected: dict[str, int] = defaultdict(int)
    slowest = (0.0, "")
    for overlap in (True, False):
        for scenario in scenarios(num_seeds, overlap):
            reason = freetoken.accepts(scenario.config)
            if reason is not None:
                rejected[reason.split(":")[0]] += 1
                continue
            for preset in freetoken.PRESETS:
                started = time.perf_counter()
                engine = freetoken.run(scenario, preset)
                slowest = max(slowest, (time.perf_counter() - started, scenario.name))
                for mode in MODES:
                    found = _disagreements(scenario, preset, engine, mode)
                    _count(table[(mode, preset, scenario.pressure, overlap)], engine, found)
                    _write(out, scenario, preset, mode, found)
    return {"table": dict(table), "rejected": dict(rejected), "slowest": slowest}


class _SimulatorHung(Exception):
    pass


def _disagreements(scenario: Scenario, preset: str, engine: dict, mode: str) -> list | None:
    """The disagreements in one mode, or None when ``simulate`` does not end within SIM_LIMIT_S."""

    def give_up(signum, frame):
        raise _SimulatorHung()

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(SIM_LIMIT_S)
    try:
        return disagreements(scenario, preset, engine, modes=(mode,))
    except _SimulatorHung:
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _count(row: list[int], engine: dict, found: list | None) -> None:
    wrong = set(engine) if found is None else {d.request_id for d in found}
    row[0] += 1
    row[1] += len(engine)
    row[2] += len(engine) - len(wrong)
    row[3] += not wrong
    row[4] += found is None


def _write(out, scenario: Scenario, preset: str, mode: str, found: list | None) -> None:
    if out is None:
        return
    rows: list[dict[str, Any]] = (
        [{"request": None, "engine": None, "simulated": "hung"}]
        if found is None
        else [
            {"request": d.request_id, "engine": list(d.engine), "simulated": list(d.simulated)} for d in found
        ]
    )
    for row in rows:
        row.update(
            scenario=scenario.name,
            seed=scenario.seed,
            pressure=scenario.pressure,
            overlap=scenario.config.overlap,
            preset=preset,
            mode=mode,
        )
        out.write(json.dumps(row, sort_keys=True) + "\n")


def print_table(result: dict) -> None:
    print(
        f"{'mode':7} {'preset':15} {'pressure':8} {'overlap':7} {'scenarios':>9} {'requests':>8} "
        f"{'equal':>6} {'all-equal':>9} {'sim-hung':>8}"
    )
    for (mode, preset, pressure, overlap), row in sorted(result["table"].items()):
        runs, requests, equal, clean, hung = row
        print(
            f"{mode:7} {preset:15} {str(pressure):8} {str(overlap):7} {runs:9} {requests:8} {equal:6} "
            f"{clean:9} {hung:8}"
        )
    for reason, count in sorted(result["rejected"].items()):
        print(f"rejected by accepts(): {count} ({reason})")
    seconds, name = result["slowest"]
    print(f"slowest FreeToken run: {seconds:.2f} s ({name})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--out", help="write each disagreement as a JSON line here")
    args = parser.parse_args(argv)
    if freetoken.installed_version() is None:
        sys.exit(
            "FreeToken is not installed: pip install --no-deps -c constraints-cpu.txt "
            "-r conformance/requirements.txt"
        )
    out = open(args.out, "w") if args.out else None
    try:
        print_table(measure(args.seeds, out))
    finally:
        if out is not None:
            out.close()


if __name__ == "__main__":
    main()
