"""Every sound preset side by side in one run: CPU seconds and peak RSS, replay and timed, with and without
the bounds, pure Python and the compiled core; a scaling table (first 1k to 12k requests) with each preset's
fitted exponent; the synthetic fan-out for memory.

Each case runs in a fresh interpreter (``speed_case.py``); cases are repeated round-robin (``--repeat``) and
each keeps its fastest simulation (this machine's speed drifts within minutes), so the ratios, to
``sglang-retain`` of the same mode, bounds and build, compare figures taken in the same minutes.

    python benchmarks/presets_speed.py [--limit 4000] [--modes replay,timed] [--bounds off,on]
        [--builds pure,compiled] [--presets P,Q] [--repeat 3] [--scaling 1000,2000,4000,8000,12000]
        [--fanout 1000000] [--trace T] [--json]

``--builds compiled`` needs ``python scripts/build_compiled.py`` first.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from benchmarks.scaling import fitted_exponent  # noqa: E402
from benchmarks.speed_case import SpeedCase, SpeedResult  # noqa: E402
from sim.engines.negative import CONTROLS  # noqa: E402
from sim.engines.registry import policy_names  # noqa: E402

BASELINE = "sglang-retain"
SOUND = [name for name in policy_names() if name not in {control[0] for control in CONTROLS}]


def run_case(case: SpeedCase) -> SpeedResult:
    """``case`` in a fresh interpreter (its own peak RSS, its own build on ``sys.path``)."""
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "speed_case.py"), json.dumps(asdict(case))],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    if done.returncode:
        raise SystemExit(f"error: case {case} failed:\n{done.stderr[-3000:]}")
    raw = json.loads(done.stdout.splitlines()[-1])
    return SpeedResult(**{**raw, "case": SpeedCase(**raw["case"])})


def fastest(cases: list[SpeedCase], repeat: int, echo: bool) -> list[SpeedResult]:
    """Every case ``repeat`` times, round-robin; each keeps its run with the least simulation CPU."""
    best: dict[SpeedCase, SpeedResult] = {}
    for _ in range(repeat):
        for case in cases:
            result = run_case(case)
            if echo:
                print(json.dumps(asdict(result)), flush=True)
            if case not in best or result.sim_cpu_s < best[case].sim_cpu_s:
                best[case] = result
    return [best[case] for case in cases]


def _baseline(results: list[SpeedResult], result: SpeedResult) -> SpeedResult | None:
    wanted = replace(result.case, preset=BASELINE)
    return next((r for r in results if r.case == wanted), None)


def speed_table(results: list[SpeedResult]) -> str:
    header = (
        f"{'preset':<20} {'mode':<6} {'bounds':<6} {'build':<8} {'requests':>8} {'sim cpu s':>9} "
        f"{'x ' + BASELINE:>17} {'process cpu s':>13} {'peak MiB':>8} {'cached tokens':>14}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        base = _baseline(results, r)
        ratio = f"{r.sim_cpu_s / base.sim_cpu_s:.2f}" if base and base.sim_cpu_s else "-"
        lines.append(
            f"{r.case.preset:<20} {r.case.mode:<6} {'on' if r.case.bounds else 'off':<6} {r.case.build:<8} "
            f"{r.num_requests:>8} {r.sim_cpu_s:>9.2f} {ratio:>17} {r.process_cpu_s:>13.2f} "
            f"{r.peak_rss_mib:>8.0f} {r.cached_tokens:>14,}"
        )
    return "\n".join(lines)


def pair_ratios(results: list[SpeedResult], field: str, one: object, other: object, label: str) -> str:
    """Per case with ``field == other``: its simulation CPU over the same case with ``field == one``."""
    by_case = {r.case: r for r in results}
    lines = []
    for r in results:
        if getattr(r.case, field) != other:
            continue
        changed: dict[str, Any] = {field: one}  # a field of SpeedCase, whichever its type
        base = by_case.get(replace(r.case, **changed))
        if base is not None and base.sim_cpu_s:
            lines.append(
                f"  {r.case.preset:<20} {r.case.mode:<6} {r.case.build:<8} {label} "
                f"{r.sim_cpu_s / base.sim_cpu_s:6.2f}x"
            )
    return "\n".join(lines)


def scaling_table(results: list[SpeedResult]) -> str:
    lines = []
    groups: dict[tuple, list[SpeedResult]] = {}
    for r in results:
        groups.setdefault((r.case.preset, r.case.mode, r.case.build), []).append(r)
    for (preset, mode, build), points in groups.items():
        sizes, seconds = [p.num_requests for p in points], [max(p.sim_cpu_s, 1e-6) for p in points]
        row = " ".join(f"{s:>6}:{t:7.2f}" for s, t in zip(sizes, seconds, strict=True))
        slope = fitted_exponent(sizes, seconds) if len(set(sizes)) > 1 else math.nan
        lines.append(f"  {preset:<20} {mode:<6} {build:<8} {row}   exponent {slope:.2f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", help="a Mooncake JSONL trace [the conversation trace]")
    parser.add_argument("--limit", type=int, default=4000, help="first N requests of the trace [4000]")
    parser.add_argument("--presets", help=f"a comma list [every sound preset: {','.join(SOUND)}]")
    parser.add_argument("--modes", default="replay,timed")
    parser.add_argument("--bounds", default="off,on", help="off, on or both (off,on)")
    parser.add_argument("--builds", default="pure", help="pure, compiled or both (pure,compiled)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case, the fastest kept [3]")
    parser.add_argument("--scaling", help="also: replay without bounds at these sizes, e.g. 1000,4000,12000")
    parser.add_argument("--fanout", type=int, help="also: replay this many synthetic fan-out requests")
    parser.add_argument("--json", action="store_true", help="also print every run as a JSON line")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.limit < 1:
        parser.error("--repeat and --limit must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    trace = str(existing_trace(args.trace or mooncake_trace("conversation")))
    presets = args.presets.split(",") if args.presets else SOUND
    builds, modes = args.builds.split(","), args.modes.split(",")
    bounds = [flag == "on" for flag in args.bounds.split(",")]
    cases = [
        SpeedCase(preset, mode, flag, build, trace, args.limit)
        for build in builds
        for mode in modes
        for flag in bounds
        for preset in presets
    ]
    results = fastest(cases, args.repeat, args.json)
    print(f"{Path(trace).name}, first {args.limit} requests; fastest of {args.repeat} per case")
    print(speed_table(results))
    for field, one, other, label in (
        ("bounds", False, True, "bounds on / off"),
        ("mode", "replay", "timed", "timed / replay"),
        ("build", "pure", "compiled", "compiled / pure"),
    ):
        text = pair_ratios(results, field, one, other, label)
        if text:
            print(text)
    if args.scaling:
        sizes = [int(size) for size in args.scaling.split(",")]
        scaled = [SpeedCase(p, "replay", False, b, trace, n) for b in builds for p in presets for n in sizes]
        print("scaling, replay without bounds (simulation CPU s at each size):")
        print(scaling_table(fastest(scaled, args.repeat, args.json)))
    if args.fanout:
        fan = [SpeedCase(p, "replay", False, b, f"fanout:{args.fanout}") for b in builds for p in presets]
        print(f"synthetic fan-out, {args.fanout:,} requests, replay without bounds:")
        print(speed_table(fastest(fan, 1, args.json)))


if __name__ == "__main__":
    main()
