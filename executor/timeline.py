"""Measured per-request and per-step times, from the steps the executor really ran.

The engine's clock is the prediction's (the backend hands it the predicted step times, so every cache decision
is the simulator's). The measured clock lays out the *same* schedule with the measured step times: step k
starts when step k - 1 ended, or later if a request it admits arrived later (an open-loop request at its trace
arrival; a follow-up ``think_time`` after its parent's measured finish). A request's first token comes at the
end of the step that computed its last prompt token; it finishes at the end of the last step that ran it.

Every output names its clock: the simulator's time columns and figures become ``predicted_*``, and the
measured ones sit beside them as ``measured_*``.
"""

from __future__ import annotations

import json
from typing import cast

import numpy as np
import pandas as pd

from sim.run.metrics import latency_percentiles
from sim.trace import Trace

REQUEST_TIMES = ("arrival_at", "first_token_at", "finished_at", "ttft_s", "tpot_s", "e2e_s")
STEP_TIMES = {"start_at": "start_at", "duration_s": "s"}  # step column -> name after the clock's prefix
SUMMARY_TIMES = (
    "makespan_s",
    "output_tokens_per_s",
    "mean_ttft_s",
    *(f"{name}_p{p}_s" for name in ("ttft", "tpot", "e2e") for p in (50, 90, 99)),
)


def measured_request_times(trace: Trace, timings: list, served: list[str]) -> pd.DataFrame:
    """arrival_at, first_token_at, finished_at, ttft_s, tpot_s, e2e_s on the measured clock (one row per
    request id in ``served``; NaN for a request no step ran)."""
    arrival: dict[str, float] = {}  # request id -> when, on the measured clock
    first: dict[str, float] = {}
    finish: dict[str, float] = {}
    starts: list[float] = []
    clock = 0.0
    for timing in timings:
        for request_id, _ in timing.ends:
            if request_id not in arrival:
                arrival[request_id] = _arrival(trace, request_id, finish)
        ready = max((arrival[rid] for rid, _ in timing.ends), default=0.0)
        start = max(clock, ready)
        starts.append(start)
        clock = start + timing.measured_s
        for request_id, end in timing.ends:
            if end >= trace.prompt_len(request_id):
                first.setdefault(request_id, clock)
            finish[request_id] = clock
    rows = [_row(trace, rid, arrival.get(rid), first.get(rid), finish.get(rid)) for rid in served]
    frame = pd.DataFrame(rows, columns=["id", *REQUEST_TIMES])
    frame.attrs["step_starts"] = starts
    return frame


def _arrival(trace: Trace, request_id: str, finish: dict[str, float]) -> float:
    request = trace.request(request_id)
    if request.after is None:  # cast: the trace's checker lets in no open-loop request without an arrival
        return float(cast(float, request.arrival))
    return finish.get(request.after, 0.0) + float(request.think_time)


def _row(trace: Trace, request_id: str, arrived, first, finished) -> tuple:
    output_len = trace.request(request_id).output_len
    missing = arrived is None or first is None or finished is None
    if missing:
        return (request_id, *([np.nan] * len(REQUEST_TIMES)))
    tpot = (finished - first) / (output_len - 1) if output_len > 1 else np.nan
    return (request_id, arrived, first, finished, first - arrived, tpot, finished - arrived)


def request_table(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The simulator's request table with its times as ``predicted_*`` and the measured ones beside them."""
    table = predicted.rename(columns={c: f"predicted_{c}" for c in REQUEST_TIMES})
    extra = measured.set_index("id").rename(columns={c: f"measured_{c}" for c in REQUEST_TIMES})
    return table.join(extra, on="id")


def step_table(steps: pd.DataFrame, timings: list, measured_starts: list[float]) -> pd.DataFrame:
    """The simulator's step table with ``predicted_start_at`` / ``predicted_s`` and the measured ones."""
    table = steps.rename(columns={c: f"predicted_{n}" for c, n in STEP_TIMES.items()})
    table["measured_start_at"] = measured_starts
    table["measured_s"] = [t.measured_s for t in timings]
    table["tokens"] = [t.shape.num_tokens for t in timings]
    return table


def summary_times(requests: pd.DataFrame, clock: str) -> dict:
    """The summary's time figures on one clock (``predicted`` or ``measured``), each named after it."""
    served = requests[requests["rejected"] == ""].rename(columns={f"{clock}_{c}": c for c in REQUEST_TIMES})
    makespan = float(served["finished_at"].max()) if len(served) else 0.0
    makespan = 0.0 if np.isnan(makespan) else makespan
    figures = {
        "makespan_s": makespan,
        "output_tokens_per_s": float(served["output_tokens"].sum() / makespan) if makespan > 0 else 0.0,
        "mean_ttft_s": float(served["ttft_s"].mean()) if len(served) else 0.0,
    }
    figures |= latency_percentiles(served)
    return {f"{clock}_{name}": value for name, value in figures.items()}


def shape_columns(shape) -> tuple[str, str]:
    """A step's shape as two JSON columns (``timings.csv``), so a run's steps can be fitted again later:
    the prefill chunks as [start, length] pairs, the decode steps' contexts."""
    return json.dumps([list(chunk) for chunk in shape.prefill]), json.dumps(list(shape.decode))
