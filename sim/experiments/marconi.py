"""Experiment ``marconi``: the shape of Marconi's hit-rate comparison (MLSys'25, Fig. 7 and 8).

Marconi against its two baselines, vLLM+ (a MAMBA state at every 32-token block, LRU over leaves) and
SGLang+ (Marconi's admission, LRU with whole-path refresh), over cache sizes given as one byte budget for KV
and states together (``--cache-bytes``), on a multi-turn trace: by default synthetic chat sessions whose
every turn resends the whole history, as the paper's LMSys and ShareGPT sessions do. By default the SimPy
engine runs it (``timed``): sessions interleave, as in Marconi's simulator, which replays requests sorted by
arrival; ``replay`` here runs each session's turns back to back, so sessions do not contend for the cache.
Each row gives the token hit rate (reused over every request's prompt tokens) of the three, Marconi's ratio
to vLLM+ and its gain over SGLang+, the bound no policy could beat with the same budget at page 1
(``sim/bounds/``) as a hit rate, and the requests each refused.

One difference from the paper's simulator, which inserts a request's whole sequence after matching it and
models no running request: here vLLM+ inserts each block's state as it is taken, and the running request's
chain of states is pinned (only leaves are evicted, and its leaf is locked), so a request whose blocks' states
alone exceed the budget is refused (counted with no hits).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from sim.run.simulate import SimConfig, SimResult, simulate
from sim.trace import Trace
from sim.trace.generate import multiturn

POLICIES = (("marconi", "Marconi"), ("marconi-sglang", "SGLang+"), ("marconi-vllm", "vLLM+"))
CACHE_GB = (2.0, 5.0, 10.0, 20.0)
MODEL = "qwen3-next"  # 3 MAMBA (GatedDeltaNet) : 1 FULL; one state weighs as much as 3144 tokens of KV


def chat_sessions(num_sessions: int = 48, num_turns: int = 8, seed: int = 0) -> Trace:
    """Chat sessions with a shared system prompt, each turn the whole history plus a new user message."""
    return multiturn(
        num_sessions=num_sessions,
        num_turns=num_turns,
        system_len=512,
        user_len=160,
        output_len=240,
        think_time=5.0,
        request_rate=0.5,
        seed=seed,
    )


def marconi_experiment(
    trace: Trace | None = None, cache_gb=CACHE_GB, model: str = MODEL, mode: str = "timed", on_point=None
) -> pd.DataFrame:
    trace = chat_sessions() if trace is None else trace
    rows = []
    for size in cache_gb:
        runs: dict[str, SimResult] = {}
        for policy, _ in POLICIES:
            runs[policy] = simulate(
                trace, SimConfig(policy=policy, model=model, mode=mode, cache_bytes=size * 1e9)
            )
            if on_point:
                on_point()
        rows.append(_row(size, runs))
    return pd.DataFrame(rows)


def _row(size: float, runs: dict[str, SimResult]) -> dict:
    rates = {policy: _hit_rate(runs[policy], runs[policy].summary.cached_tokens) for policy, _ in POLICIES}
    marconi, sglang, vllm = (rates[policy] for policy, _ in POLICIES)
    row: dict[str, Any] = {"cache_gb": size}
    row.update({f"{label} hit rate": round(rates[policy], 4) for policy, label in POLICIES})
    row["Marconi / vLLM+"] = f"{marconi / vllm:.2f}x" if vllm else "inf" if marconi else "-"
    row["Marconi vs SGLang+"] = f"{(marconi - sglang) / sglang:+.1%}" if sglang else "-"
    row["bound hit rate"] = round(_hit_rate(runs["marconi"], runs["marconi"].summary.bound_tokens), 4)
    row["Marconi / bound"] = f"{runs['marconi'].summary.cached_of_bound:.1%}"
    row["rejected"] = "/".join(str(runs[policy].summary.rejected_requests) for policy, _ in POLICIES)
    return row


def _hit_rate(result: SimResult, tokens: int | None) -> float:
    """Over every request's prompt tokens, served or not, so that a policy refusing requests gains nothing."""
    prompts = int(result.requests["prompt_tokens"].sum())
    return (tokens or 0) / prompts if prompts else 0.0


def parse_sizes(text: str) -> tuple[float, ...]:
    """``--cache-gb``: a comma list of positive budgets in GB."""
    try:
        sizes = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--cache-gb: {text!r} is not a comma list of numbers (GB)") from None
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"--cache-gb: {text!r} needs one or more budgets > 0 (GB)")
    return sizes
