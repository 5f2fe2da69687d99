"""Wall time against trace length (the first 1k to 12k requests of the Mooncake conversation trace), in
replay and timed mode: a table and the fitted exponent (the log-log slope; 1 is linear).

Each point runs in a fresh interpreter (as benchmarks/real_traces.py runs a case); the time is the
simulation's alone, the import excluded.

    python benchmarks/scaling.py [--trace T] [--sizes 1000,2000,4000,8000,12000] [--modes replay,timed]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.real_traces import MODES, Case, existing_trace, mooncake_trace, run_isolated  # noqa: E402
from sim.engines.registry import policy_names  # noqa: E402

DEFAULT_SIZES = (1000, 2000, 4000, 8000, 12000)


@dataclass(frozen=True)
class ScalingPoint:
    mode: str
    num_requests: int
    wall_s: float
    cpu_s: float


def fitted_exponent(num_requests: list[int], seconds: list[float]) -> float:
    """The least-squares slope of log(seconds) on log(num_requests): time ~ n ** slope."""
    if len(num_requests) != len(seconds) or len(set(num_requests)) < 2:
        raise ValueError(
            f"need two or more distinct sizes with one time each, got {num_requests} / {seconds}"
        )
    if min(num_requests) <= 0 or min(seconds) <= 0:
        raise ValueError(f"sizes and times must be > 0, got {num_requests} / {seconds}")
    slope, _ = np.polyfit([math.log(n) for n in num_requests], [math.log(s) for s in seconds], 1)
    return float(slope)


def measure(path: Path, mode: str, sizes: list[int], policy: str) -> list[ScalingPoint]:
    points = []
    for size in sizes:
        result = run_isolated(Case(str(path), mode, policy, limit=size))
        points.append(ScalingPoint(mode, result.num_requests, result.wall_s, result.cpu_s))
        print(
            f"  {mode:<6} {result.num_requests:>6} requests: {result.wall_s:8.2f} s wall, "
            f"{result.cpu_s:8.2f} s cpu",
            flush=True,
        )
    return points


def format_table(points: list[ScalingPoint]) -> str:
    header = f"{'mode':<6} {'requests':>8} {'wall s':>9} {'cpu s':>9} {'ms/request':>10}"
    lines = [header, "-" * len(header)]
    lines += [
        f"{p.mode:<6} {p.num_requests:>8} {p.wall_s:>9.2f} {p.cpu_s:>9.2f} "
        f"{1000 * p.wall_s / p.num_requests:>10.3f}"
        for p in points
    ]
    for mode in dict.fromkeys(p.mode for p in points):
        ours = [p for p in points if p.mode == mode]
        if len({p.num_requests for p in ours}) < 2:
            continue
        sizes = [p.num_requests for p in ours]
        lines.append(
            f"{mode}: fitted exponent {fitted_exponent(sizes, [p.wall_s for p in ours]):.3f} (wall), "
            f"{fitted_exponent(sizes, [p.cpu_s for p in ours]):.3f} (cpu)"
        )
    return "\n".join(lines)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be integers >= 1, got {text!r}")
    return sizes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", help="a Mooncake JSONL trace; default: shared/traces/mooncake's conversation"
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="request counts, comma-separated (a size past the trace's end runs the whole trace)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="replay, timed or both, comma-separated")
    parser.add_argument("--policy", choices=policy_names(), default="sglang-retain")
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    if not args.modes or not set(args.modes) <= set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}, got {','.join(args.modes)!r}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    path = existing_trace(args.trace or mooncake_trace("conversation"))
    print(f"trace {path}, policy {args.policy}, model inkling, GPU h200 (SimConfig defaults)")
    points = [p for mode in args.modes for p in measure(path, mode, args.sizes, args.policy)]
    print(format_table(points))


if __name__ == "__main__":
    main()
