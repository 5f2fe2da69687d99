"""The peer's side of ``peer_kvcache_sim.py``: KVCache.AI's kvcache-simulator 0.1.3 run on a Mooncake trace
(its Python and C++ backends), its infinite-cache walk recounted our way, and its run on whole blocks only."""

from __future__ import annotations

import gc
import json
import resource
from dataclasses import dataclass
from pathlib import Path

from sim.trace.mooncake_import import MOONCAKE_BLOCK_LEN

BLOCK_LEN = MOONCAKE_BLOCK_LEN  # the peer's block, our page
BACKENDS = ("python", "cpp")


@dataclass(frozen=True)
class SideRun:
    side: str
    # CPU seconds of this process and of the children it waited for (the peer's C++ binary): on a shared
    # machine wall time measures the neighbours as much as the code
    load_s: float  # reading the trace
    sim_s: float  # everything after: the peer's plan or binary files, our simulation
    hit_tokens: int
    total_tokens: int  # prompt tokens of the measured requests
    note: str = ""

    @property
    def total_s(self) -> float:
        return self.load_s + self.sim_s

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.total_tokens if self.total_tokens else 0.0


def peer_modules():
    try:
        from kvcache_sim import cpp_backend, plan, policies, trace
    except ImportError:
        raise SystemExit(
            "error: kvcache-simulator is not installed here: pip install kvcache-simulator==0.1.3"
        ) from None
    return cpp_backend, plan, policies, trace


def cpu_s() -> float:
    """CPU seconds so far: this process, and the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn, *args, **kwargs):
    gc.collect()
    started = cpu_s()
    value = fn(*args, **kwargs)
    return value, cpu_s() - started


def run_peer(backend: str, path: Path, limit: int | None, budget_blocks: int) -> SideRun:
    cpp_backend, plan_mod, policies, trace_mod = peer_modules()
    peer_trace, load_s = _timed(
        trace_mod.parse_trace_file, path, block_size=BLOCK_LEN, max_records=limit or 0
    )
    warmup = peer_trace.request_count // 2
    if backend == "python":
        started = cpu_s()
        plan = plan_mod.build_execution_plan(peer_trace, warmup_fraction=0.5)
        result = policies.simulate_policy(plan, "lru", budget_blocks)
        sim_s = cpu_s() - started
    else:
        sweep, sim_s = _timed(
            cpp_backend.run_cpp_sweep,
            peer_trace,
            capacities=[budget_blocks],
            policies=["lru"],
            warmup_requests=warmup,
        )
        result = sweep.results[("lru", budget_blocks)]
    note = (
        ""
        if result.measurementMode == "fixed_window"
        else f"{result.measurementMode}: the cache never filled before the window; the peer reports no figure"
    )
    return SideRun(f"kvcache-simulator {backend}", load_s, sim_s, result.hitTokens, result.totalTokens, note)


def compile_cpp() -> tuple[float | None, str]:
    """Build the peer's C++ binary (cached in the temp folder by source hash); (seconds, what happened)."""
    cpp_backend = peer_modules()[0]
    try:
        binary, seconds = _timed(cpp_backend.ensure_cpp_simulator)
    except Exception as error:  # no compiler, or the compiler failed: reported, the backend skipped
        return None, f"C++ backend unavailable: {error}"
    return seconds, f"C++ binary {binary} ready in {seconds:.1f} s (0 when already built)"


def peer_unbounded_recount(path: Path, limit: int | None) -> tuple[SideRun, SideRun]:
    """The peer's infinite-cache walk over its own plan, counted its way and our way: a hit stops at
    ``page_floor(prompt_len - 1)`` (the last prompt token is recomputed) and counts whole blocks only."""
    _, plan_mod, _, trace_mod = peer_modules()
    peer_trace = trace_mod.parse_trace_file(path, block_size=BLOCK_LEN, max_records=limit or 0)
    plan = plan_mod.build_execution_plan(peer_trace, warmup_fraction=0.5)
    seen = bytearray(len(plan.parent))
    raw = ours = total = 0
    for index in range(plan.request_count):
        events = range(plan.request_starts[index], plan.request_starts[index + 1])
        prompt_len = sum(plan.tokens[e] for e in events)
        num_hit = next((k for k, e in enumerate(events) if not seen[plan.node_for_event[e]]), len(events))
        for event in events:
            seen[plan.node_for_event[event]] = 1
        if index >= plan.warmup_requests:
            total += prompt_len
            raw += sum(plan.tokens[e] for e in events[:num_hit])
            ours += min(num_hit, (prompt_len - 1) // BLOCK_LEN) * BLOCK_LEN
    return (
        SideRun("peer walk, its counting", 0.0, 0.0, raw, total),
        SideRun("peer walk, our counting", 0.0, 0.0, ours, total),
    )


def whole_block_lines(path: Path, limit: int | None) -> list[str]:
    """The trace as the peer reads it, each prompt cut to its whole 512-token blocks (a prompt shorter
    than one block keeps its one partial block)."""
    lines: list[str] = []
    with open(path, encoding="utf-8") as f:
        for text in f:
            if limit is not None and len(lines) >= limit:
                break
            if text.strip():
                record = json.loads(text)
                num_whole = record["input_length"] // BLOCK_LEN
                if num_whole:
                    record = {
                        "input_length": num_whole * BLOCK_LEN,
                        "hash_ids": record["hash_ids"][:num_whole],
                    }
                lines.append(json.dumps(record))
    return lines


def run_peer_whole_blocks(path: Path, limit: int | None, budget_blocks: int, total_tokens: int) -> SideRun:
    """The peer's Python LRU on ``whole_block_lines``; the rate over the full prompts' tokens."""
    _, plan_mod, policies, trace_mod = peer_modules()
    peer_trace = trace_mod.parse_trace_lines(whole_block_lines(path, limit), block_size=BLOCK_LEN)
    plan = plan_mod.build_execution_plan(peer_trace, warmup_fraction=0.5)
    result = policies.simulate_policy(plan, "lru", budget_blocks)
    return SideRun(
        "kvcache-simulator python, whole blocks",
        0.0,
        0.0,
        result.hitTokens,
        total_tokens,
        "" if result.measurementMode == "fixed_window" else result.measurementMode,
    )
