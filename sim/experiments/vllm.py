"""The vLLM experiments (issue #12): public reports about vLLM's hybrid prefix cache, reproduced with the
``vllm`` preset on Qwen3.5-4B (block 528, as the reports logged it: Triton GDN prefill, no internal
checkpoints), each under vLLM 0.33.0's defaults and under the settings of the report's time.

* ``short_prompt`` (vllm#40696): a resent prompt hits only whole blocks below ``N - 1``.
* ``align`` (vllm#45238): 8 shared prefixes x 8 prompts at concurrency 1; a prefix off the block grid.
* ``retention`` (vllm#45845 / #43447 / #52216): dense retention fills the shared pool in a long multi-turn run.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

MODEL = "qwen3.5-4b"
TRITON = {"prefill_checkpoints": False}  # B = 528, the block every report logged
# vLLM 0.33.0 (retention 0, the junction) against the settings of the reports' time (dense, no junction)
SETTINGS: dict[str, dict[str, Any]] = {
    "0.33.0": {"retention_interval": 0, "junction": True},
    "dense, no junction": {"retention_interval": "none", "junction": False},
}


def one_after_another(
    prompts: list[tuple[str, list[Segment]]], output_len: int = 8, sessions: dict | None = None
) -> Trace:
    """Requests sent at concurrency 1: each follows the one before it, in the given order."""
    requests: list[Request] = []
    for index, (request_id, prompt) in enumerate(prompts):
        session = (sessions or {}).get(request_id)
        timing = {"arrival": 0.0} if index == 0 else {"after": requests[-1].id}
        requests.append(
            Request(id=request_id, session=session, prompt=prompt, output_len=output_len, **timing)
        )
    return Trace(requests, path="<vllm experiment>")


def _run(trace: Trace, knobs: dict, **pools) -> pd.DataFrame:
    config = SimConfig(policy="vllm", model=MODEL, knobs={**TRITON, **knobs}, mode="replay", **pools)
    return simulate(trace, config).requests.set_index("id")


SHORT_REPORTED = {
    100: "0%",
    300: "0%",
    480: "0%",
    527: "0%",
    552: "~95% (24 recomputed)",
    979: "~54% (451 recomputed)",
}


def short_prompt(lengths=(100, 300, 480, 527, 528, 529, 552, 979, 1000, 1056, 1057, 2000)) -> pd.DataFrame:
    """vllm#40696: each prompt sent twice; what the resend gets from the cache."""
    trace = one_after_another(
        [(f"L{n}-{send}", [Segment(ref=f"x{n}", len=n)]) for n in lengths for send in ("first", "resend")]
    )
    runs = {name: _run(trace, knobs) for name, knobs in SETTINGS.items()}
    rows = []
    for n in lengths:
        row = {"prompt": n}
        for name, requests in runs.items():
            row[f"{name}:cached"] = int(requests.loc[f"L{n}-resend", "cached_tokens"])
        cached = row["0.33.0:cached"]
        row.update(
            recomputed=n - cached, reuse=f"{100 * cached / n:.1f}%", reported=SHORT_REPORTED.get(n, "")
        )
        rows.append(row)
    return pd.DataFrame(rows)


def align_trace(shared: int, unique: int, num_prefixes: int = 8, per_prefix: int = 8) -> Trace:
    """Prompt j of every prefix, then prompt j + 1 of every prefix (a shuffled benchmark's order)."""
    return one_after_another(
        [
            (f"p{p}-q{j}", [Segment(ref=f"prefix{p}", len=shared), Segment(ref=f"p{p}-q{j}", len=unique)])
            for j in range(per_prefix)
            for p in range(num_prefixes)
        ]
    )


# the issue body (main @ d841386d2: dense, no junction) and its author's re-measurement of 1500 / 700 in the
# thread (main @ 16282a9c4, dense with the junction of #37898; and with a retention-interval prototype)
ALIGN_REPORTED = {
    (1600, 600, "dense, no junction"): "52/64 at 1584",
    (1500, 700, "dense, no junction"): "0/64",
    (1500, 700, "dense, junction"): "40/64 at 1056",
    (1500, 700, "0.33.0"): "48/64 (interval prototype)",
}
ALIGN_SETTINGS: dict[str, dict[str, Any]] = {
    **SETTINGS,
    "dense, junction": {"retention_interval": "none", "junction": True},
}


def align(workloads=((1600, 600), (1500, 700)), max_batched: int = 2048) -> pd.DataFrame:
    """vllm#45238: shared/unique prompt composition, 8 prefixes x 8 prompts, max_num_batched_tokens 2048."""
    rows = []
    for shared, unique in workloads:
        trace = align_trace(shared, unique)
        for name, knobs in ALIGN_SETTINGS.items():
            requests = _run(trace, {**knobs, "chunked_prefill_size": max_batched})
            cached = requests["cached_tokens"]
            hit_at = sorted({int(c) for c in cached if c})
            rows.append(
                {
                    "shared / unique": f"{shared} / {unique}",
                    "settings": name,
                    "hits": f"{int((cached > 0).sum())}/{len(cached)}",
                    "hit at": ", ".join(map(str, hit_at)) or "-",
                    "cached tokens": int(cached.sum()),
                    "recomputed": int(requests["recomputed_tokens"].sum()),
                    "reported": ALIGN_REPORTED.get((shared, unique, name), ""),
                }
            )
    return pd.DataFrame(rows)


def conversations(
    num_sessions: int = 8,
    num_turns: int = 16,
    system_len: int = 2000,
    turn_len: int = 2000,
    output_len: int = 200,
) -> Trace:
    """Long agentic conversations served round-robin at concurrency 1: turn k of every session, then turn
    k + 1; each turn resends the session's history (its last prompt and output) plus ``turn_len`` new tokens
    (a tool result), after one shared system prompt."""
    prompts: dict[str, list[Segment]] = {}
    order, sessions = [], {}
    for turn in range(num_turns):
        for session in range(num_sessions):
            request_id, previous = f"s{session}-t{turn}", f"s{session}-t{turn - 1}"
            history = (
                prompts[previous] + [Segment(output_of=previous)]
                if turn
                else [Segment(ref="sys", len=system_len)]
            )
            prompts[request_id] = history + [Segment(ref=f"new-{request_id}", len=turn_len)]
            order.append((request_id, prompts[request_id]))
            sessions[request_id] = f"s{session}"
    return one_after_another(order, output_len, sessions)


RETENTION_RUNS = (
    # gemma-4's FULL blocks hold 32 tokens (its FULL pages are half its SWA pages): --pool-tokens counts FULL
    # tokens, so these pools have the block counts 300k-400k had when every group was taken for 16-token blocks
    ("gemma-4-26b-a4b", 8192, (450_000, 500_000, 550_000, 700_000)),
    ("qwen3.5-4b", 2048, (250_000, 300_000)),
)


def retention(runs=RETENTION_RUNS, intervals=("none", 0, 2112), trace: Trace | None = None) -> pd.DataFrame:
    """Reuse per quarter of the turns under each retention interval, as the pool shrinks."""
    trace = trace or conversations()
    rows = []
    for model, max_batched, pools in runs:
        for pool in pools:
            for interval in intervals:
                knobs = {**TRITON, "retention_interval": interval, "chunked_prefill_size": max_batched}
                result = simulate(
                    trace, SimConfig(policy="vllm", model=model, knobs=knobs, mode="replay", pool_tokens=pool)
                )
                rows.append(_retention_row(model, max_batched, pool, interval, result))
    return pd.DataFrame(rows)


def _retention_row(model: str, max_batched: int, pool: int, interval, result) -> dict:
    requests = result.requests
    turns = requests["id"].str.rsplit("-t", n=1).str[1].astype(int)
    quarter = turns * 4 // (turns.max() + 1)
    row = {
        "model": model,
        "batched": max_batched,
        "pool tokens": pool,
        "retention": "none (dense)" if interval == "none" else interval,
    }
    for index, part in requests.groupby(quarter):
        row[f"turns Q{index + 1}"] = round(part["cached_tokens"].sum() / part["prompt_tokens"].sum(), 2)
    summary = result.summary
    row.update(
        {
            "evicted FULL": summary.evictions_full,
            "evicted SWA": summary.evictions_swa,
            "evicted Mamba": summary.evictions_mamba,
        }
    )
    return row
