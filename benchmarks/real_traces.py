"""The real Mooncake traces through the whole simulator, replay and timed mode: speed, memory, reuse.

Each (trace, mode) case runs in a fresh interpreter so that its peak RSS is its own. Prints wall and
CPU seconds of the simulation (the import is timed apart), requests/s, peak RSS, and the cached-token
fraction of the prompts.

    python benchmarks/real_traces.py [--trace T]... [--mode replay|timed|both] [--policy P] [--limit N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import resource
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sim.engines.registry import policy_names  # noqa: E402
from sim.models import MODELS  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

MODES = ("replay", "timed")


MOONCAKE_URL = "https://github.com/kvcache-ai/Mooncake/tree/main/FAST25-release/traces"


def shared_dirs() -> list[Path]:
    """Where a ``shared/`` folder with ``traces/mooncake/`` may be, in order: $HYBRIDCACHE_SHARED, inside the
    checkout, beside it or beside any folder above it (a git worktree under ``wt/`` finds ``../../shared``)."""
    named = os.environ.get("HYBRIDCACHE_SHARED")
    found = [Path(named)] if named else []
    return found + [REPO_ROOT / "shared"] + [folder / "shared" for folder in REPO_ROOT.parents]


def mooncake_trace(name: str) -> Path:
    """The first ``shared/traces/mooncake/<name>_trace.jsonl`` that exists (else the first place looked)."""
    candidates = [folder / "traces" / "mooncake" / f"{name}_trace.jsonl" for folder in shared_dirs()]
    return next((path for path in candidates if path.is_file()), candidates[0])


def existing_trace(path: str | Path) -> Path:
    """The trace path, or an error that says where it was looked for and exactly what to set."""
    path = Path(path)
    if path.is_file():
        return path
    if path.parent.parent.parent not in shared_dirs():  # a --trace that names a missing file
        raise SystemExit(f"error: trace {path} not found")
    looked = ", ".join(str(folder / "traces" / "mooncake") for folder in shared_dirs()[:4])
    raise SystemExit(
        f"error: no Mooncake trace {path.name} found (looked in {looked} and beside every folder "
        f"above the checkout). Pass --trace FILE (a raw Mooncake JSONL trace, {MOONCAKE_URL}), or "
        f"set HYBRIDCACHE_SHARED=DIR where DIR/traces/mooncake/{path.name} exists"
    )


@dataclass(frozen=True)
class Case:
    trace_path: str
    mode: str
    policy: str = "sglang-retain"
    model: str = "inkling"
    limit: int | None = None
    use_tracemalloc: bool = False
    chains: bool = True  # infer multi-turn chains at import (False: every block a plain segment)
    bounds: bool = True  # the offline bounds too (False: the simulation alone, as before the bounds existed)


@dataclass(frozen=True)
class CaseResult:
    trace: str
    mode: str
    policy: str
    num_requests: int
    import_s: float
    wall_s: float
    cpu_s: float
    requests_per_s: float
    start_rss_mib: float  # after the imports, before the trace: the interpreter, pandas, simpy
    peak_rss_mib: float
    traced_peak_mib: float | None  # tracemalloc's peak of Python allocations during the simulation
    prompt_tokens: int
    cached_tokens: int
    cached_fraction: float
    rejected_requests: int


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: Case) -> CaseResult:
    """One simulation in this process (peak RSS is the process's, so run it alone: ``run_isolated``)."""
    start_rss = _rss_mib()
    started = time.perf_counter()
    trace = import_mooncake(case.trace_path, limit=case.limit, chains=case.chains)
    imported = time.perf_counter()
    if case.use_tracemalloc:
        tracemalloc.start()
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    result = simulate(
        trace, SimConfig(policy=case.policy, model=case.model, mode=case.mode, bounds=case.bounds)
    )
    wall_s, cpu_s = time.perf_counter() - wall_started, time.process_time() - cpu_started
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if case.use_tracemalloc else None
    tracemalloc.stop()
    summary = result.summary
    return CaseResult(
        trace=Path(case.trace_path).name,
        mode=case.mode,
        policy=case.policy,
        num_requests=len(trace),
        import_s=imported - started,
        wall_s=wall_s,
        cpu_s=cpu_s,
        requests_per_s=len(trace) / wall_s,
        start_rss_mib=start_rss,
        peak_rss_mib=_rss_mib(),
        traced_peak_mib=traced,
        prompt_tokens=summary["prompt_tokens"],
        cached_tokens=summary["cached_tokens"],
        cached_fraction=summary["cached_tokens"] / max(summary["prompt_tokens"], 1),
        rejected_requests=summary["rejected_requests"],
    )


def run_isolated(case: Case) -> CaseResult:
    """``run_case`` in a fresh interpreter (spawn), so its peak RSS is not an earlier case's."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_case, (case,))


def profile_case(case: Case, num_functions: int) -> str:
    """The simulation of ``case`` under cProfile: the top functions by own time, as pstats prints them."""
    trace = import_mooncake(case.trace_path, limit=case.limit, chains=case.chains)
    profiler = cProfile.Profile()
    profiler.runcall(simulate, trace, SimConfig(policy=case.policy, model=case.model, mode=case.mode))
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(num_functions)
    return out.getvalue()


def format_table(results: list[CaseResult]) -> str:
    header = (
        f"{'trace':<26} {'mode':<6} {'policy':<14} {'requests':>8} {'import s':>8} {'wall s':>8} "
        f"{'cpu s':>8} {'req/s':>8} {'start MiB':>9} {'peak MiB':>9} {'traced MiB':>10} {'cached':>7}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        traced = "-" if r.traced_peak_mib is None else f"{r.traced_peak_mib:.0f}"
        lines.append(
            f"{r.trace:<26} {r.mode:<6} {r.policy:<14} {r.num_requests:>8} {r.import_s:>8.2f} "
            f"{r.wall_s:>8.2f} {r.cpu_s:>8.2f} {r.requests_per_s:>8.0f} {r.start_rss_mib:>9.0f} "
            f"{r.peak_rss_mib:>9.0f} {traced:>10} {r.cached_fraction:>7.4f}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace",
        action="append",
        help="a Mooncake JSONL trace (repeatable); default: "
        "the conversation and synthetic traces of shared/traces/mooncake",
    )
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--policy", choices=policy_names(), default="sglang-retain")
    parser.add_argument("--model", choices=sorted(MODELS), default="inkling")
    parser.add_argument("--limit", type=int, help="only the first N requests of each trace")
    parser.add_argument(
        "--no-bounds",
        action="store_true",
        help="skip the offline bounds (the simulation alone: compare with runs before they existed)",
    )
    parser.add_argument(
        "--no-chains",
        action="store_true",
        help="import without multi-turn chains (the importer before chains: compare with older runs)",
    )
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        help="profile each case in this process instead and print its top N functions by own time",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object a case instead of the table")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be >= 1, got {args.limit}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    paths = [
        existing_trace(p)
        for p in (args.trace or [mooncake_trace("conversation"), mooncake_trace("synthetic")])
    ]
    modes = MODES if args.mode == "both" else (args.mode,)
    cases = [
        Case(
            str(path),
            mode,
            args.policy,
            args.model,
            args.limit,
            args.tracemalloc,
            not args.no_chains,
            not args.no_bounds,
        )
        for path in paths
        for mode in modes
    ]
    if args.profile:
        for case in cases:
            print(f"== {Path(case.trace_path).name} {case.mode} ({case.policy}, {case.model})")
            print(profile_case(case, args.profile))
        return
    results = []
    for case in cases:
        results.append(run_isolated(case))
        if args.json:
            print(json.dumps(asdict(results[-1])), flush=True)
    if not args.json:
        print(f"model {args.model}, policy {args.policy}, GPU h200, 40 GB of KV (SimConfig defaults)")
        print(format_table(results))


if __name__ == "__main__":
    main()
