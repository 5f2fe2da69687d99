"""Push a Mooncake trace through the cache manager alone (match, insert, finish; no time, no engine).

Prints requests/s and peak memory. By default each request is prefilled in one chunk and finished
without decoding (its prompt is what later turns share); ``--decode`` also runs every decode step.

    python benchmarks/manager_mooncake.py [--trace FILE] [--limit N] [--decode]

The trace defaults to the Mooncake conversation trace in shared/traces/mooncake/ (found in, beside or
above the checkout, or under $HYBRIDCACHE_SHARED; benchmarks/real_traces.py: mooncake_trace).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.cache.manager import CacheManager  # noqa: E402
from sim.cache.sizing import sizes_from_tokens  # noqa: E402
from sim.cache.solo_run import run_alone  # noqa: E402
from sim.engines.registry import make_manager, make_policy, policy_names  # noqa: E402
from sim.models import get_model  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace", help="a raw Mooncake JSONL trace [the conversation trace in shared/traces]"
    )
    # the radix managers (vllm has a block cache of its own: benchmarks/real_traces.py --policy vllm times it)
    parser.add_argument(
        "--policy", default="sglang-retain", choices=[p for p in policy_names() if p != "vllm"]
    )
    parser.add_argument("--model", default="inkling")
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--pool-tokens", type=int, default=20_000_000)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--decode", action="store_true", help="also run every decode step (slow)")
    args = parser.parse_args()

    args.trace = str(existing_trace(args.trace or mooncake_trace("conversation")))
    started = time.perf_counter()
    trace = import_mooncake(args.trace, limit=args.limit)
    loaded = time.perf_counter()
    model = get_model(args.model)
    policy = make_policy(args.policy, page_size=args.page_size, chunked_prefill_size=1 << 30)
    sizes = sizes_from_tokens(args.page_size, args.pool_tokens, states=200_000)
    manager = make_manager(model, policy, sizes)
    assert isinstance(manager, CacheManager)  # the radix managers only (the --policy choices)
    cached = prompt_tokens = iteration = 0
    for request in sorted(trace, key=lambda r: r.arrival or 0.0):  # Mooncake: every request is open loop
        tokens = trace.request_seq(request.id)
        prompt_len = trace.prompt_len(request.id)
        output_len = request.output_len if args.decode else 1
        run = run_alone(manager, request.id, tokens, prompt_len, output_len, 1 << 30, iteration)
        iteration = run.end_iteration
        cached += run.match.cached_len
        prompt_tokens += prompt_len
    done = time.perf_counter()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    num = len(trace)
    print(
        f"trace {args.trace}: {num} requests, {prompt_tokens} prompt tokens (import {loaded - started:.2f} s)"
    )
    print(
        f"policy {args.policy}, model {args.model}, page {args.page_size}, decode {'on' if args.decode else 'off'}"
    )
    print(
        f"cached {cached} tokens ({cached / prompt_tokens:.3f} of prompts); "
        f"tree holds {manager.tree.num_full_pages} FULL pages"
    )
    print(
        f"manager: {done - loaded:.2f} s, {num / (done - loaded):.0f} requests/s; peak RSS {peak_mib:.0f} MiB"
    )


if __name__ == "__main__":
    main()
