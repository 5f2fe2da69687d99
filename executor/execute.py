"""``cli.py execute``: the simulator's prediction and a real run of the same trace, side by side.

The same scheduler and cache manager drive both; the executor backend runs every batch on the real
model, on memory laid out by the manager and NaN-poisoned wherever it frees. What is checked: every
request's outputs (the log-prob of each output token, and the bits of the logits row behind it) equal a
replay of that request from scratch, bit for bit (`executor/bitwise.py`). A correct policy gives 0
requests that are not bit-exact; a policy that reuses memory it freed, or a state saved at the wrong
position, shows up on exactly the requests that relied on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from executor.backend import ExecutorBackend
from executor.bitwise import RequestCheck, check_request, gather_outputs
from executor.model import HybridModel
from executor.replay import replay_outputs
from sim.engines.registry import engine_of
from sim.run.setup import build
from sim.run.simulate import SimConfig, SimResult, cost_model, simulate
from sim.sched.request import served_mask
from sim.trace import Trace

TIMING_COLUMNS = ("tokens", "prefill_tokens", "predicted_s", "measured_s")


@dataclass
class ExecuteResult:
    predicted: SimResult
    measured: SimResult
    requests: pd.DataFrame  # one row per request: reuse, the simulator's SWA flag, the bitwise check
    timings: pd.DataFrame  # one row per step: tokens, predicted_s, measured_s
    summary: dict
    step_timings: list = field(default_factory=list)  # StepTiming per step, for calibration


def execute(
    trace: Trace,
    config: SimConfig,
    device: str = "cpu",
    kernels: str = "triton",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> ExecuteResult:
    config = replace(config, mode="timed")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "--device cuda: this machine has no CUDA device that torch can use "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); use --device cpu"
        )
    model_spec, policy, _ = build(config)
    refusal = engine_of(policy).executes
    if refusal is not None:
        raise ValueError(refusal.format(policy=policy.name))
    model = HybridModel(model_spec, seed=seed, device=device, dtype=dtype)
    cost = cost_model(config, model_spec)  # the prediction's own, so both runs schedule alike
    predicted = simulate(trace, config)
    backend = ExecutorBackend(model, cost, kernels)
    measured = simulate(trace, config, backend=backend)
    _check_same_schedule(predicted, measured)
    # a request the pools refused never completed: its outputs (if it ran before it was given up) are not
    # a finished sequence, and comparing them with a whole replay would raise a false alarm
    rejected = set(measured.requests.loc[~served_mask(measured.requests), "id"])
    served = [rid for rid in measured.requests["id"] if rid in backend.outputs and rid not in rejected]
    replayed = replay_outputs(model, trace, served, kernels)
    checks = {
        rid: check_request(gather_outputs(backend.outputs[rid], len(ref.logprobs)), ref)
        for rid, ref in replayed.items()
    }
    requests = _request_table(measured, checks)
    timings = pd.DataFrame(
        [
            (t.shape.num_tokens, t.shape.num_prefill_tokens, t.predicted_s, t.measured_s)
            for t in backend.timings
        ],
        columns=TIMING_COLUMNS,
    )  # columns even with no step
    return ExecuteResult(predicted, measured, requests, timings, _summary(requests, timings), backend.timings)


def _check_same_schedule(predicted: SimResult, measured: SimResult) -> None:
    """The backend hands the engine the predicted step times, so both runs must make the same decisions;
    a difference is a bug in this harness, not a finding about the policy."""
    same = predicted.requests["cached_tokens"].tolist() == measured.requests["cached_tokens"].tolist()
    if not same or len(predicted.steps) != len(measured.steps):
        raise RuntimeError(
            "execute: the executor's run scheduled differently from the prediction "
            f"({len(measured.steps)} steps vs {len(predicted.steps)}); the backend perturbed it"
        )


def _request_table(measured: SimResult, checks: dict[str, RequestCheck]) -> pd.DataFrame:
    table = measured.requests[
        ["id", "prompt_tokens", "cached_tokens", "relies_on_freed_window", "rejected"]
    ].copy()
    missing = RequestCheck(0, False, np.nan, np.nan)  # rejected: never served, nothing compared
    for column in RequestCheck._fields:
        table[column] = [getattr(checks.get(rid, missing), column) for rid in table["id"]]
    table["checked"] = [rid in checks for rid in table["id"]]
    return table


def _ids(requests: pd.DataFrame, mask) -> list[str]:
    return [str(r) for r in requests["id"][mask]]


def _summary(requests: pd.DataFrame, timings: pd.DataFrame) -> dict:
    checked = requests[requests["checked"]]
    not_exact = ~checked["bit_exact"].astype(bool)
    error = (timings["measured_s"] - timings["predicted_s"]).abs() / timings["measured_s"]
    total_s = float(timings["measured_s"].sum())
    return {
        "requests": int(len(requests)),
        "requests_checked": int(len(checked)),
        "requests_rejected": int((~served_mask(requests)).sum()),
        "rejected_ids": _ids(requests, ~served_mask(requests)),
        "requests_reusing": int((checked["cached_tokens"] > 0).sum()),
        "cached_tokens": int(checked["cached_tokens"].sum()),
        "outputs_checked": int(checked["outputs"].sum()),
        "requests_not_bit_exact": int(not_exact.sum()),
        "not_bit_exact_ids": _ids(checked, not_exact),
        "relies_on_freed_window_ids": _ids(requests, requests["relies_on_freed_window"].astype(bool)),
        "logprob_max_abs_diff": float(checked["logprob_max_abs_diff"].max()) if len(checked) else 0.0,
        "kl_max": float(checked["kl"].max()) if len(checked) else 0.0,
        "kl_nonzero": int((checked["kl"] != 0.0).sum()),
        "steps": int(len(timings)),
        "measured_s": total_s,
        "predicted_s": float(timings["predicted_s"].sum()),
        "step_time_mape": float(error.mean()) if len(timings) else 0.0,
        "tokens_per_s": float(timings["tokens"].sum() / total_s) if total_s > 0 else 0.0,
    }
