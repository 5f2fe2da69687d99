"""Peak memory against trace length, for every preset: is it flat once the trace itself is counted?

Each (preset, length) case runs in a fresh interpreter on the first N requests of the Mooncake conversation
trace, by default with the small pools of issue #18 (every pool evicts all the time, which is where lazy
deletion queues grew). Prints the peak RSS, the RSS after the trace is loaded (the trace's own share), and
the simulation's part of the peak: the last column is what must stay flat in N.

    python benchmarks/memory.py [--sizes 2000,4000,12000] [--policy P]... [--mode replay|timed]
                                [--pool-tokens 131072 --swa-pool-tokens 0 --mamba-states 6] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.real_traces import _rss_mib, existing_trace, mooncake_trace  # noqa: E402
from sim.engines.registry import policy_names  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

PRESETS = [name for name in policy_names() if not name.startswith("broken-")]  # negative controls left out
SMALL_POOLS = {"pool_tokens": 131072, "swa_pool_tokens": 0, "mamba_states": 6}


@dataclass(frozen=True)
class Case:
    trace_path: str
    policy: str
    limit: int
    mode: str
    pools: dict


@dataclass(frozen=True)
class Result:
    policy: str
    requests: int
    mode: str
    loaded_rss_mib: float  # after the trace is imported: interpreter, libraries and the trace
    peak_rss_mib: float
    simulation_mib: float  # peak - loaded: what the simulation itself held at its most
    wall_s: float
    rejected_requests: int
    evictions: int


def run_case(case: Case) -> Result:
    trace = import_mooncake(case.trace_path, limit=case.limit)
    loaded = _rss_mib()
    started = time.perf_counter()
    summary = simulate(trace, SimConfig(policy=case.policy, mode=case.mode, **case.pools)).summary
    peak = _rss_mib()
    evictions = summary["evictions_full"] + summary["evictions_swa"] + summary["evictions_mamba"]
    return Result(
        case.policy,
        len(trace),
        case.mode,
        loaded,
        peak,
        peak - loaded,
        time.perf_counter() - started,
        summary["rejected_requests"],
        evictions,
    )


def run_isolated(case: Case) -> Result:
    """In a fresh interpreter: ru_maxrss is the process's peak, so each case needs a process of its own."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_case, (case,))


def format_table(results: list[Result]) -> str:
    header = (
        f"{'policy':<20} {'requests':>8} {'loaded MiB':>10} {'peak MiB':>9} {'simulation MiB':>14} "
        f"{'wall s':>7} {'rejected':>8} {'evictions':>9}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.policy:<20} {r.requests:>8} {r.loaded_rss_mib:>10.0f} {r.peak_rss_mib:>9.0f} "
            f"{r.simulation_mib:>14.0f} {r.wall_s:>7.1f} {r.rejected_requests:>8} {r.evictions:>9}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", help="a Mooncake JSONL trace [shared/traces/mooncake/conversation_trace.jsonl]"
    )
    parser.add_argument("--sizes", default="2000,4000,12000", help="first N requests, a comma list")
    parser.add_argument("--policy", action="append", choices=policy_names(), help="repeatable [every preset]")
    parser.add_argument("--mode", choices=["replay", "timed"], default="replay")
    for name, default in SMALL_POOLS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    parser.add_argument("--default-pools", action="store_true", help="SimConfig's pools (40 GB) instead")
    parser.add_argument("--json", action="store_true", help="one JSON object a case")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    path = existing_trace(args.trace or mooncake_trace("conversation"))
    pools = {} if args.default_pools else {name: getattr(args, name) for name in SMALL_POOLS}
    sizes = [int(size) for size in args.sizes.split(",")]
    results = []
    for policy in args.policy or PRESETS:
        for size in sizes:
            results.append(run_isolated(Case(str(path), policy, size, args.mode, pools)))
            if args.json:
                print(json.dumps(asdict(results[-1])), flush=True)
    if not args.json:
        print(f"{path.name}, {args.mode} mode, pools {pools or 'from 40 GB'}")
        print(format_table(results))


if __name__ == "__main__":
    main()
