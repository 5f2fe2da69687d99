"""The seed experiments (docs/seed-experiments.md), each as a table in the seed's own shape."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sim.cost import CostModel, get_gpu
from sim.run.metrics import compare
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import s1 as s1_trace
from sim.trace.generate import s2 as s2_trace
from sim.trace.generate import s3 as s3_trace

S1_POOLS: dict[str, Any] = dict(pool_tokens=4_000_000, mamba_states=4096)


def s1(
    pages=(64, 128),
    intervals=(256, 512),
    trigger: str = "tokens",
    num_prompts: int = 32,
    prompt_len: int = 3000,
    output_len: int = 1024,
    policies=("sglang", "sglang-retain"),
    model: str = "inkling",
    prompt_len_jitter: int = 0,
    on_point=None,
) -> pd.DataFrame:
    """Second-turn decode-region reuse over page x interval, floor off -> on (SGLang PR #34729)."""
    trace = s1_trace(
        num_prompts=num_prompts,
        prompt_len=prompt_len,
        output_len=output_len,
        prompt_len_jitter=prompt_len_jitter,
    )
    rows = []
    for page in pages:
        for interval in intervals:
            results = {}
            for policy in policies:
                knobs = dict(
                    page_size=page,
                    track_interval=interval,
                    chunked_prefill_size=16384,
                    swa_free_trigger=trigger,
                    max_running_requests=64,
                )
                results[policy] = simulate(
                    trace, SimConfig(policy=policy, model=model, knobs=knobs, **S1_POOLS)
                )
                if on_point:
                    on_point()
            rows.append(_s1_row(page, interval, results, policies))
    return pd.DataFrame(rows)


def _s1_row(page: int, interval: int, results: dict, policies) -> dict:
    row: dict[str, Any] = {"page_size": page, "track_interval": interval}
    turn2 = {p: r.requests[r.requests["followup"]] for p, r in results.items()}
    for policy in policies:
        t = turn2[policy]
        row[f"{policy}:hits"] = f"{int(t['decode_region_hit'].astype(bool).sum())}/{len(t)}"
        row[f"{policy}:reused"] = int(t["cached_tokens"].sum())
        row[f"{policy}:recomputed"] = int(t["recomputed_tokens"].sum())
        row[f"{policy}:mean_reuse"] = round(float(t["reuse_fraction"].mean()), 3)
        row[f"{policy}:peak_swa_slots"] = results[policy].summary.peak_swa_slots
    base, other = policies[0], policies[-1]
    row.update(compare(turn2[base], turn2[other]))
    return row


def s2(
    distances=tuple(range(10, 23)) + (32, 64, 256, 1024),
    policies=("freetoken", "freetoken-lazy"),
    model: str = "gemma-4-26b-a4b",
    page_size: int = 1,
) -> pd.DataFrame:
    """Second request's reuse against the distance from prompt 1's end to the divergence point."""
    rows = []
    for distance in distances:
        row = {"distance": distance}
        for policy in policies:
            result = simulate(
                s2_trace(distance), SimConfig(policy=policy, model=model, knobs={"page_size": page_size})
            )
            second = result.requests.iloc[1]
            row[f"{policy}:cached"] = f"{int(second['cached_tokens'])}/{int(second['prompt_tokens'])}"
        rows.append(row)
    return pd.DataFrame(rows)


def s3(
    policies=("freetoken", "freetoken-lazy"), model: str = "gemma-4-26b-a4b", gpu: str = "h200"
) -> pd.DataFrame:
    """Fan-out vs append over a 7.7k-token system prompt: cached tokens and predicted prefill time."""
    rows = []
    for mode in ("fanout", "append"):
        for policy in policies:
            result = simulate(
                s3_trace(mode=mode), SimConfig(policy=policy, model=model, gpu=gpu, knobs={"page_size": 1})
            )
            second = result.requests.iloc[1]
            cost = CostModel(result.setup.model, get_gpu(gpu))
            prompt, cached = int(second["prompt_tokens"]), int(second["cached_tokens"])
            rows.append(
                {
                    "pattern": mode,
                    "policy": policy,
                    "cached": f"{cached}/{prompt}",
                    "prefill_s": round(cost.prefill_time(prompt, cached), 4),
                    "prefill_s_no_cache": round(cost.prefill_time(prompt, 0), 4),
                }
            )
    return pd.DataFrame(rows)
