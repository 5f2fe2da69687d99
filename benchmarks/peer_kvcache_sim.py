"""Side by side with KVCache.AI's kvcache-simulator 0.1.3: same Mooncake trace, FULL attention, LRU.

Both sides count as the peer does: hits over the last 50% of requests (from request floor(N/2) in file
order), in whole 512-token blocks, over the same cache budget in blocks. Ours is the ``radix`` policy
(FULL only) at page 512 in replay mode; its per-request table gives the hits. Prints both hit rates
and CPU times (this process and the children it waited for: the peer's C++ binary) for each of the
peer's backends here (Python; C++, compiled on first use), the ratios, and two alignment checks: an
unbounded cache (where the counting rules alone differ) and the peer fed whole blocks only (where its
capacity no longer holds partial tail blocks). docs/benchmarks.md
explains what remains. Needs ``pip install kvcache-simulator==0.1.3``. Our side computes no offline
bounds unless ``--bounds`` (the peer has none: without them both sides do the same work).

    python benchmarks/peer_kvcache_sim.py [--trace T] [--budget-blocks B] [--limit N] [--backends python,cpp]
                                          [--repeat 3] [--bounds]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from benchmarks.peer_kvcache_side import (  # noqa: E402
    BACKENDS,
    BLOCK_LEN,
    SideRun,
    _timed,
    compile_cpp,
    peer_modules,
    peer_unbounded_recount,
    run_peer,
    run_peer_whole_blocks,
)
from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.sched.request import served_mask  # noqa: E402
from sim.trace import Request, Trace  # noqa: E402
from sim.trace.mooncake_import import import_mooncake  # noqa: E402


def adapt(trace: Trace, path: Path, drop_outputs: bool, file_order: bool) -> Trace:
    """Without outputs (one output token, never computed, so only the prompt is inserted, as the peer
    inserts it) and/or with equal arrivals nudged 1 ns apart so that replay keeps file order."""
    if not (drop_outputs or file_order):
        return trace
    requests = [
        replace(
            r,
            output_len=1 if drop_outputs else r.output_len,
            arrival=_open_loop_arrival(r) + index * 1e-9 if file_order else r.arrival,
        )
        for index, r in enumerate(trace)
    ]
    return Trace(requests, path=str(path))


def _open_loop_arrival(request: Request) -> float:
    if request.arrival is None:  # the peer replays arrivals only: a Mooncake import has no chains here
        raise ValueError(
            f"request {request.id}: no arrival time (a closed-loop request); the peer needs open loop"
        )
    return request.arrival


def measured_hits(requests: pd.DataFrame) -> tuple[int, int]:
    """(hit tokens in whole blocks, prompt tokens) over the last 50% of the rows (file order)."""
    measured = requests.iloc[len(requests) // 2 :]
    hits = measured["cached_tokens"].where(served_mask(measured), 0) // BLOCK_LEN * BLOCK_LEN
    return int(hits.sum()), int(measured["prompt_tokens"].sum())


def run_ours(
    path: Path,
    limit: int | None,
    budget_blocks: int | None,
    drop_outputs: bool,
    file_order: bool,
    bounds: bool = False,
) -> SideRun:
    """Replay with ``radix`` at page 512; ``budget_blocks`` None: a pool that never evicts. ``bounds``: the
    offline bounds too (work the peer does not do)."""
    # the peer knows no sessions: the plain block structure, as it reads the file (and drop_outputs needs it)
    imported, load_s = _timed(import_mooncake, path, limit=limit, chains=False)
    trace = adapt(imported, path, drop_outputs, file_order)  # not timed: the peer has no such step
    if budget_blocks is None:
        budget_blocks = sum(-(-(trace.prompt_len(r.id) + r.output_len) // BLOCK_LEN) for r in trace) + 1
    config = SimConfig(
        policy="radix",
        mode="replay",
        pool_tokens=budget_blocks * BLOCK_LEN,
        knobs={"page_size": BLOCK_LEN, "track_interval": BLOCK_LEN},
        bounds=bounds,
    )
    result, sim_s = _timed(simulate, trace, config)
    hits, total = measured_hits(result.requests)
    rejected = int((~served_mask(result.requests)).sum())
    label = "hybridcache replay, " + ("prompts only" if drop_outputs else "with outputs")
    return SideRun(
        label, load_s, sim_s, hits, total, f"rejected: {rejected} (larger than the pool)" if rejected else ""
    )


def format_rows(runs: list[SideRun], with_times: bool = True) -> str:
    times = f" {'load s':>7} {'sim s':>7} {'total s':>8}" if with_times else ""
    header = f"{'side':<40}{times} {'hit rate':>9} {'hit tokens':>11}  note"
    lines = [header, "-" * len(header)]
    for r in runs:
        times = f" {r.load_s:>7.2f} {r.sim_s:>7.2f} {r.total_s:>8.2f}" if with_times else ""
        lines.append(f"{r.side:<40}{times} {r.hit_rate:>9.5f} {r.hit_tokens:>11}  {r.note}")
    return "\n".join(lines)


def format_ratios(ours: SideRun, peers: list[SideRun]) -> str:
    lines = [f"ratios, {ours.side} over each peer backend:"]
    for peer in peers:
        lines.append(
            f"  vs {peer.side:<26} total time {ours.total_s / peer.total_s:6.2f}x, "
            f"sim time {ours.sim_s / peer.sim_s:6.2f}x, hit rate {ours.hit_rate / peer.hit_rate:.4f}x "
            f"({100 * (ours.hit_rate - peer.hit_rate):+.3f} points)"
            if peer.hit_rate
            else f"  vs {peer.side}: no peer hit rate ({peer.note})"
        )
    return "\n".join(lines)


def fastest_of(sides: list, repeat: int) -> list[SideRun]:
    """Each side run ``repeat`` times, round-robin so that a slow spell of the machine hits every side
    alike; per side, the fastest load and the fastest simulation (the figures do not change between runs)."""
    rounds = [[side() for side in sides] for _ in range(repeat)]
    best = []
    for runs in zip(*rounds, strict=True):
        if len({(r.hit_tokens, r.total_tokens) for r in runs}) != 1:
            raise RuntimeError(f"{runs[0].side}: figures differ between runs: {runs}")
        best.append(replace(runs[0], load_s=min(r.load_s for r in runs), sim_s=min(r.sim_s for r in runs)))
    return best


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", help="a Mooncake JSONL trace; default: shared/traces/mooncake's conversation"
    )
    parser.add_argument("--limit", type=int, help="only the first N requests")
    parser.add_argument("--budget-blocks", type=int, default=8000, help="cache budget in 512-token blocks")
    parser.add_argument("--backends", default="python,cpp", help="the peer's backends, comma-separated")
    parser.add_argument(
        "--outputs",
        choices=["drop", "keep", "both"],
        default="both",
        help="ours without outputs (the peer's work: prompts only), with them, or both",
    )
    parser.add_argument(
        "--file-order",
        action="store_true",
        help="replay equal-arrival requests in file order, as the peer does",
    )
    parser.add_argument("--no-checks", action="store_true", help="skip the two alignment checks")
    parser.add_argument(
        "--bounds",
        action="store_true",
        help="our side also computes the offline bounds (the peer has none; off: the same work on both sides)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="run every side this many times, round-robin, and keep each side's fastest "
        "load and simulation (this machine's speed drifts by up to 1.5x within minutes)",
    )
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    if not set(backends) <= set(BACKENDS):
        parser.error(f"--backends: choose from {', '.join(BACKENDS)}, got {args.backends!r}")
    if args.budget_blocks < 1 or (args.limit is not None and args.limit < 2) or args.repeat < 1:
        parser.error("--budget-blocks and --repeat must be >= 1 and --limit >= 2")
    args.backends = backends
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    path = existing_trace(args.trace or mooncake_trace("conversation"))
    peer_modules()
    sides = []
    for backend in args.backends:
        if backend == "cpp":
            compile_s, message = compile_cpp()
            print(message)
            if compile_s is None:
                continue
        sides.append(lambda backend=backend: run_peer(backend, path, args.limit, args.budget_blocks))
    drops = {"drop": [True], "keep": [False], "both": [True, False]}[args.outputs]
    sides += [
        lambda drop=drop: run_ours(path, args.limit, args.budget_blocks, drop, args.file_order, args.bounds)
        for drop in drops
    ]
    runs = fastest_of(sides, args.repeat)
    peers, ours = runs[: len(runs) - len(drops)], runs[len(runs) - len(drops) :]
    num_requests = len(import_mooncake(path, limit=args.limit))
    print(
        f"trace {path}: {num_requests} requests; measured: the last {num_requests - num_requests // 2} "
        f"({ours[0].total_tokens} prompt tokens)"
    )
    print(
        f"FULL attention, LRU, block = page = {BLOCK_LEN} tokens, budget {args.budget_blocks} blocks; "
        f"ours: policy radix, replay order {'file' if args.file_order else 'by arrival'}, "
        f"bounds {'on' if args.bounds else 'off'}"
    )
    print(format_rows(peers + ours))
    print(format_ratios(ours[0], peers))
    if not args.no_checks:
        print("alignment checks:")
        unbounded = run_ours(path, args.limit, None, True, args.file_order)
        print(
            format_rows(
                [*peer_unbounded_recount(path, args.limit), replace(unbounded, side="ours, unbounded")],
                with_times=False,
            )
        )
        print(
            format_rows(
                [run_peer_whole_blocks(path, args.limit, args.budget_blocks, ours[0].total_tokens), ours[0]],
                with_times=False,
            )
        )


if __name__ == "__main__":
    main()
