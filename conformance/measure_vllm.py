"""The vLLM 0.33.0 oracle's answers on generated scenarios, reproducibly (nothing is stored in the repository).

    python -m conformance.measure_vllm --seeds 0-49                 # the summary table
    python -m conformance.measure_vllm --seeds 0-99 --json out.json  # plus every outcome, for comparing

Per scenario: requests, requests with a hit, cached tokens and the wall time of `run` (vLLM's one-off import
is timed separately). Scenarios vLLM refuses are listed with its reason. Same arguments, same JSON bytes
(the timings go to the table only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from conformance.engines import vllm as engine
from conformance.generate import generate


def seed_range(text: str) -> range:
    first, _, last = text.partition("-")
    if not first.isdigit() or (last and not last.isdigit()):
        raise argparse.ArgumentTypeError(f"--seeds wants N or N-M, got {text!r}")
    return range(int(first), int(last or first) + 1)


def measure(seeds: range, pressures: tuple[bool, ...]) -> tuple[list[dict], list[float]]:
    rows: list[dict[str, Any]] = []
    times: list[float] = []
    for pressure in pressures:
        for seed in seeds:
            scenario = generate("vllm", seed, pressure)
            reason = engine.accepts(scenario.config)
            if reason is not None:
                rows.append({"scenario": scenario.name, "refused": reason})
                continue
            started = time.perf_counter()
            outcomes = engine.run(scenario)
            times.append(time.perf_counter() - started)
            rows.append(
                {
                    "scenario": scenario.name,
                    "seed": seed,
                    "pressure": pressure,
                    "cached_tokens": {rid: o.cached_tokens for rid, o in outcomes.items()},
                }
            )
    return rows, times


def summary(rows: list[dict], times: list[float]) -> str:
    lines = [
        "| pressure | scenarios | refused | requests | hits | cached tokens |",
        "|---|---|---|---|---|---|",
    ]
    for pressure in (False, True):
        mine = [row for row in rows if row["scenario"].count("-pressure") == pressure]
        if not mine:
            continue
        served = [row["cached_tokens"] for row in mine if "cached_tokens" in row]
        values = [tokens for outcome in served for tokens in outcome.values()]
        lines.append(
            f"| {pressure} | {len(mine)} | {len(mine) - len(served)} | {len(values)} | "
            f"{sum(v > 0 for v in values)} | {sum(values)} |"
        )
    lines += [f"refused {row['scenario']}: {row['refused']}" for row in rows if "refused" in row]
    if times:
        ordered = sorted(times)
        lines.append(
            f"run time per scenario: median {ordered[len(ordered) // 2] * 1e3:.0f} ms, "
            f"max {ordered[-1] * 1e3:.0f} ms, total {sum(times):.1f} s over {len(times)}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-49"))
    parser.add_argument("--pressure", choices=("both", "no", "yes"), default="both")
    parser.add_argument("--json", type=Path, help="write every scenario's outcomes here")
    args = parser.parse_args()
    pressures = {"both": (False, True), "no": (False,), "yes": (True,)}[args.pressure]
    started = time.perf_counter()
    engine.accepts(generate("vllm", args.seeds[0], pressures[0]).config)  # imports vLLM once
    print(f"vLLM import and first start-up: {time.perf_counter() - started:.1f} s")
    rows, times = measure(args.seeds, pressures)
    print(summary(rows, times))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
