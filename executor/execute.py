"""``cli.py execute``: the simulator's prediction and a real run of the same trace, side by side.

The same scheduler and cache manager drive both; the executor backend runs every batch on the real
model. Reuse must match request by request, and every request's output log-probs must equal a replay
from scratch (KL exactly 0) wherever the policy reused correctly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from executor.backend import ExecutorBackend
from executor.model import HybridModel
from executor.replay import kl_per_request, replay_logprobs
from sim.simulate import SimConfig, SimResult, build, cost_model, simulate
from sim.trace import Trace


@dataclass
class ExecuteResult:
    predicted: SimResult
    measured: SimResult
    requests: pd.DataFrame  # id, cached (predicted / measured), relies_on_freed_window, kl
    timings: pd.DataFrame  # one row per step: tokens, predicted_s, measured_s
    summary: dict
    step_timings: list = field(default_factory=list)  # StepTiming per step, for calibration


def execute(trace: Trace, config: SimConfig, device: str = "cpu", kernels: str = "triton", seed: int = 0,
            dtype: torch.dtype = torch.float32) -> ExecuteResult:
    config = replace(config, mode="timed")
    model_spec, _, _ = build(config)
    model = HybridModel(model_spec, seed=seed, device=device, dtype=dtype)
    cost = cost_model(config, model_spec)  # the prediction's own, so both runs schedule alike
    predicted = simulate(trace, config)
    backend = ExecutorBackend(model, cost, kernels)
    measured = simulate(trace, config, backend=backend)
    served = [rid for rid in measured.requests["id"] if rid in backend.logprobs]
    kl = kl_per_request(backend.logprobs, replay_logprobs(model, trace, served, kernels))
    requests = _request_table(predicted, measured, kl)
    timings = pd.DataFrame([{"tokens": t.shape.num_tokens, "prefill_tokens": t.shape.num_prefill_tokens,
                             "predicted_s": t.predicted_s, "measured_s": t.measured_s} for t in backend.timings])
    return ExecuteResult(predicted, measured, requests, timings, _summary(requests, timings), backend.timings)


def _request_table(predicted: SimResult, measured: SimResult, kl: dict[str, float]) -> pd.DataFrame:
    table = predicted.requests[["id", "prompt_tokens", "cached_tokens"]].rename(
        columns={"cached_tokens": "predicted_cached"})
    table["measured_cached"] = measured.requests["cached_tokens"].to_numpy()
    table["relies_on_freed_window"] = measured.requests["relies_on_freed_window"].to_numpy()
    table["kl"] = [kl.get(rid, math.nan) for rid in table["id"]]
    return table


def _summary(requests: pd.DataFrame, timings: pd.DataFrame) -> dict:
    kl = requests["kl"].to_numpy()
    nonzero = ~(kl == 0.0)  # NaN (a read of poisoned memory) counts as nonzero
    error = (timings["measured_s"] - timings["predicted_s"]).abs() / timings["measured_s"]
    total_s = float(timings["measured_s"].sum())
    return {
        "requests": int(len(requests)),
        "reuse_mismatches": int((requests["predicted_cached"] != requests["measured_cached"]).sum()),
        "kl_nonzero": int(nonzero.sum()),
        "kl_nonzero_ids": [str(r) for r in requests["id"][nonzero]],
        "kl_max": float(np.nanmax(np.where(np.isnan(kl), np.inf, kl))) if len(kl) else 0.0,
        "step_time_mape": float(error.mean()) if len(timings) else 0.0,
        "tokens_per_s": float(timings["tokens"].sum() / total_s) if total_s > 0 else 0.0,
        "measured_s": total_s, "predicted_s": float(timings["predicted_s"].sum()), "steps": int(len(timings)),
        "cached_tokens": int(requests["measured_cached"].sum()),
    }
