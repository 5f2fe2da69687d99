"""What ``execute`` reports: per request the bitwise check, and the run's figures, each time figure named by
its clock (``predicted_*``: the simulator's cost model; ``measured_*``: the executor's steps)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from executor.bitwise import RequestCheck
from executor.timeline import SUMMARY_TIMES, summary_times
from sim.models import ModelSpec
from sim.run.simulate import SimResult
from sim.sched.request import served_mask


def request_checks(measured: SimResult, checks: dict[str, RequestCheck]) -> pd.DataFrame:
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


def bitwise_summary(requests: pd.DataFrame, timings: pd.DataFrame) -> dict:
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
        "measured_tokens_per_s": float(timings["tokens"].sum() / total_s) if total_s > 0 else 0.0,
    }


def run_summary(
    measured: SimResult,
    request_times: pd.DataFrame,
    executed: ModelSpec,
    warmup_s: float | None,
    timed_compiles: int | None,
) -> dict:
    """The simulator's reuse, pool and bound figures, both clocks' times, the model run and the warm-up."""
    figures = {k: v for k, v in measured.summary.as_dict().items() if k not in SUMMARY_TIMES}
    figures |= summary_times(request_times, "predicted") | summary_times(request_times, "measured")
    return figures | {
        "executed_model": executed.name,
        "executed_layers": len(executed.layer_kinds),
        "warmup_s": warmup_s,  # None: no warm-up pass (the interpreter compiles nothing)
        "jit_compiles_timed": timed_compiles,  # None under the interpreter; 0 after a complete warm-up
    }
