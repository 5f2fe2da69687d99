"""``cli.py execute``: the simulator's prediction and a real run of the same trace, side by side.

The same scheduler and cache manager drive both; the executor backend runs every batch on the real
model, on memory laid out by the manager and NaN-poisoned wherever it discards. What is checked: every
request's outputs (the log-prob of each output token, and the bits of the logits row behind it) equal a
replay of that request from scratch, bit for bit (`executor/bitwise.py`). A correct policy gives 0
requests that are not bit-exact; a policy that reuses memory it freed, or a state saved at the wrong
position, shows up on exactly the requests that relied on it.

A warm-up pass runs the same schedule first, untimed, so that every kernel variant the timed pass launches
is compiled before it (``executor/jit_variants.py`` counts the ones the timed pass still compiled: 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pandas as pd
import torch

from executor.backend import ExecutorBackend
from executor.bitwise import check_request, gather_outputs
from executor.jit_variants import compiled_variants
from executor.model import HybridModel
from executor.replay import replay_outputs
from executor.results import bitwise_summary, request_checks, run_summary
from executor.shrink import executed_model
from executor.support import execute_refusal
from executor.timeline import measured_request_times, request_table, shape_columns, step_table
from sim.run.setup import build
from sim.run.simulate import SimConfig, SimResult, cost_model, simulate
from sim.sched.request import served_mask
from sim.trace import Trace

TIMING_COLUMNS = (
    "tokens",
    "prefill_tokens",
    "predicted_s",
    "measured_s",
    "prefill_chunks",
    "decode_contexts",
)


@dataclass
class ExecuteResult:
    predicted: SimResult
    measured: SimResult  # the executor's run: its time columns are the engine's clock (the prediction's)
    requests: pd.DataFrame  # one row per request: reuse, the simulator's SWA flag, the bitwise check
    timings: pd.DataFrame  # one row per step: tokens, predicted_s, measured_s
    summary: dict  # the check, and every time figure named predicted_* or measured_*
    step_timings: list = field(default_factory=list)  # StepTiming per step, for calibration
    request_times: pd.DataFrame | None = None  # the request table, predicted_* and measured_* times
    step_times: pd.DataFrame | None = None  # the step table, predicted_* and measured_* times


def execute(
    trace: Trace,
    config: SimConfig,
    device: str = "cpu",
    kernels: str = "triton",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    shrink: str = "auto",
    warmup: str = "auto",
) -> ExecuteResult:
    """``shrink``: ``auto`` runs a preset shrunk on a CPU (``executor/shrink.py``), ``none`` at full size;
    ``warmup``: ``auto`` (a warm-up pass on a GPU only: the interpreter compiles nothing), ``full`` or
    ``none``."""
    config = replace(config, mode="timed")
    _check_device(device)
    setup = build(config)
    preset = setup.model
    refusal = execute_refusal(setup.policy)
    if refusal is not None:
        raise ValueError(refusal)
    if warmup not in ("auto", "full", "none"):
        raise ValueError(f"warmup must be auto, full or none, got {warmup!r}")
    model = HybridModel(executed_model(preset, shrink, device), seed=seed, device=device, dtype=dtype)
    cost = cost_model(config, preset)  # the prediction's own, so both runs schedule alike
    predicted = simulate(trace, config, setup=setup)
    warmup_s = None
    if warmup == "full" or (warmup == "auto" and device == "cuda"):
        warm = ExecutorBackend(model, cost, kernels)
        warm.timed, started = False, time.perf_counter()
        simulate(trace, config, backend=warm, setup=setup)
        warmup_s = time.perf_counter() - started
    before = compiled_variants()
    backend = ExecutorBackend(model, cost, kernels)
    measured = simulate(trace, config, backend=backend, setup=setup)
    after = compiled_variants()
    _check_same_schedule(predicted, measured)
    return _result(trace, model, kernels, predicted, measured, backend, warmup_s, _delta(before, after))


def _result(trace, model, kernels, predicted, measured, backend, warmup_s, timed_compiles) -> ExecuteResult:
    # a request the pools refused never completed: its outputs (if it ran before it was given up) are not
    # a finished sequence, and comparing them with a whole replay would raise a false alarm
    rejected = set(measured.requests.loc[~served_mask(measured.requests), "id"])
    served = [rid for rid in measured.requests["id"] if rid in backend.outputs and rid not in rejected]
    replayed = replay_outputs(model, trace, served, kernels, window_offset=backend.pools.layout.window_offset)
    checks = {
        rid: check_request(gather_outputs(backend.outputs[rid], len(ref.logprobs)), ref)
        for rid, ref in replayed.items()
    }
    requests = request_checks(measured, checks)
    timings = pd.DataFrame(
        [
            (
                t.shape.num_tokens,
                t.shape.num_prefill_tokens,
                t.predicted_s,
                t.measured_s,
                *shape_columns(t.shape),
            )
            for t in backend.timings
        ],
        columns=TIMING_COLUMNS,
    )  # columns even with no step
    times = measured_request_times(trace, backend.timings, list(measured.requests["id"]))
    request_times = request_table(measured.requests, times)
    step_times = step_table(measured.steps, backend.timings, times.attrs["step_starts"])
    summary = bitwise_summary(requests, timings)
    run = run_summary(measured, request_times, model.spec, warmup_s, timed_compiles)
    summary |= {name: value for name, value in run.items() if name not in summary}
    summary["same_step_state_hits"] = backend.same_step_state_hits
    return ExecuteResult(
        predicted, measured, requests, timings, summary, backend.timings, request_times, step_times
    )


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


def _check_device(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "--device cuda: this machine has no CUDA device that torch can use "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); use --device cpu"
        )


def _check_same_schedule(predicted: SimResult, measured: SimResult) -> None:
    """The backend hands the engine the predicted step times, so both runs must make the same decisions;
    a difference is a bug in this harness, not a finding about the policy."""
    same = predicted.requests["cached_tokens"].tolist() == measured.requests["cached_tokens"].tolist()
    if not same or len(predicted.steps) != len(measured.steps):
        raise RuntimeError(
            "execute: the executor's run scheduled differently from the prediction "
            f"({len(measured.steps)} steps vs {len(predicted.steps)}); the backend perturbed it"
        )
