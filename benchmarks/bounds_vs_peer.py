"""Our Belady bound beside kvcache-simulator 0.1.3's OPTIMAL on a Mooncake trace (FULL attention, prompts only).

Four figures per budget, over the last 50% of requests (file order), as ``peer_kvcache_sim.py`` counts them:

1. the peer's OPTIMAL on the trace as it reads it (every prompt block, the partial tail included);
2. the peer's OPTIMAL on the prompts cut to whole blocks (``whole_block_lines``), where its capacity no
   longer holds partial tail blocks;
3. our Belady (``sim/bounds/belady.py``) run on the peer's own plan (its block trie, its lookups: every
   block of every prompt, tails weighted by their tokens): this must equal (1) exactly;
4. our bound as ``simulate`` reports it: the imported trace, page 512, outputs dropped, file order, our
   counting rule (a hit stops at ``page_floor(prompt_len - 1)``), whole pages; beside it the ``radix`` (LRU)
   replay of the same, which must not exceed it.

(4) differs from (2) only by the counting rules docs/benchmarks.md takes apart for LRU. Needs
``pip install kvcache-simulator==0.1.3``.

    python benchmarks/bounds_vs_peer.py [--trace T] [--budget-blocks 2000,8000,32000] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.peer_kvcache_side import BLOCK_LEN, peer_modules, whole_block_lines  # noqa: E402
from benchmarks.peer_kvcache_sim import adapt, measured_hits  # noqa: E402
from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.bounds.belady import belady_page_hits  # noqa: E402
from sim.bounds.events import Lookup, Produce  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402


def peer_plan(path: Path, limit: int | None, whole_blocks: bool):
    _, plan_mod, _, trace_mod = peer_modules()
    if whole_blocks:
        trace = trace_mod.parse_trace_lines(whole_block_lines(path, limit), block_size=BLOCK_LEN)
    else:
        trace = trace_mod.parse_trace_file(path, block_size=BLOCK_LEN, max_records=limit or 0)
    return plan_mod.build_execution_plan(trace, warmup_fraction=0.5)


def peer_optimal(plan, budget_blocks: int) -> tuple[int, int, str]:
    result = peer_modules()[2].simulate_policy(plan, "optimal", budget_blocks)
    return result.hitTokens, result.totalTokens, result.measurementMode


def belady_on_peer_plan(plan, budget_blocks: int) -> int:
    """Our Belady over the peer's block trie and lookups; hit tokens of the measured requests."""
    events, pages_of = [], []
    for index in range(plan.request_count):
        nodes = [
            plan.node_for_event[e] for e in range(plan.request_starts[index], plan.request_starts[index + 1])
        ]
        events += [Lookup(str(index), len(nodes), True), Produce(str(index), 0, len(nodes))]
        pages_of += [nodes, nodes]
    hits = belady_page_hits(events, pages_of, plan.parent, budget_blocks)
    total = 0
    for index in range(plan.warmup_requests, plan.request_count):
        start = plan.request_starts[index]
        total += sum(plan.tokens[start : start + hits[str(index)]])
    return total


def ours(path: Path, limit: int | None, budget_blocks: int) -> tuple[int, int, int]:
    """(bound hit tokens, radix LRU hit tokens, prompt tokens) over the measured requests, our counting."""
    trace = adapt(import_mooncake(path, limit=limit, chains=False), path, drop_outputs=True, file_order=True)
    config = SimConfig(
        policy="radix",
        mode="replay",
        pool_tokens=budget_blocks * BLOCK_LEN,
        knobs={"page_size": BLOCK_LEN, "track_interval": BLOCK_LEN},
    )
    result = simulate(trace, config)
    bound_run = _bound_per_request(trace, budget_blocks)
    measured = result.requests.iloc[len(result.requests) // 2 :]
    lru, total = measured_hits(result.requests)
    return sum(bound_run[r] for r in measured["id"]), lru, total


def _bound_per_request(trace, budget_blocks: int) -> dict[str, int]:
    from sim.bounds.belady import belady_hits
    from sim.bounds.events import replay_events
    from sim.bounds.page_paths import PagePaths
    from sim.run.replay import replay_order

    order = replay_order(trace)
    events = replay_events(trace, order, set(order), set(order), BLOCK_LEN)
    return belady_hits(events, PagePaths(trace, BLOCK_LEN), budget_blocks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", help="a Mooncake JSONL trace; default: shared/traces/mooncake's conversation"
    )
    parser.add_argument("--limit", type=int, help="only the first N requests")
    parser.add_argument(
        "--budget-blocks", default="2000,8000,32000", help="comma-separated budgets in blocks"
    )
    args = parser.parse_args(argv)
    path = existing_trace(args.trace or mooncake_trace("conversation"))
    budgets = [int(b) for b in args.budget_blocks.split(",") if b]
    raw_plan, whole_plan = peer_plan(path, args.limit, False), peer_plan(path, args.limit, True)
    header = (
        f"{'blocks':>7} {'peer OPTIMAL':>13} {'ours on its plan':>17} {'peer, whole blocks':>19} "
        f"{'our bound':>11} {'radix (LRU)':>12} {'prompt tokens':>14}  s"
    )
    print(
        f"trace {path}; FULL attention, block = page = {BLOCK_LEN}, prompts only, file order, hits over the "
        f"last 50% (as peer_kvcache_sim.py counts them)"
    )
    print(header)
    for budget in budgets:
        started = time.perf_counter()
        peer_hits, peer_total, mode = peer_optimal(raw_plan, budget)
        same_plan = belady_on_peer_plan(raw_plan, budget)
        whole_hits, _, _ = peer_optimal(whole_plan, budget)
        bound, lru, total = ours(path, args.limit, budget)
        note = "" if mode == "fixed_window" else f"  (peer: {mode})"
        print(
            f"{budget:>7} {peer_hits:>13} {same_plan:>17} {whole_hits:>19} {bound:>11} {lru:>12} {total:>14}  "
            f"{time.perf_counter() - started:.1f}{note}"
        )
        if same_plan != peer_hits and mode == "fixed_window":
            print(f"        MISMATCH: our Belady on the peer's plan {same_plan} != its OPTIMAL {peer_hits}")
        if lru > bound:
            print(f"        VIOLATION: radix {lru} exceeds the bound {bound}")
    print(f"rates are over {peer_total} (peer) / {total} (ours) prompt tokens")


if __name__ == "__main__":
    main()
