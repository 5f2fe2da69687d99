"""What ``cli.py execute`` and ``cli.py calibrate`` print and write.

``execute --out DIR`` writes ``requests.csv`` and ``steps.csv`` with every time named by its clock
(``predicted_*``, ``measured_*``), ``summary.json`` (the check, and the time figures on both clocks),
``bitwise.csv`` (the check per request) and ``timings.csv`` (per step: tokens, predicted and measured
seconds, and the step's shape, which ``calibrate --from-run`` fits again).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from executor.execute import ExecuteResult, execute
from sim.atomic import atomic_write_many
from sim.run.simulate import SimConfig
from sim.run.tables_io import check_table_outputs, csv_text, table_bytes
from sim.trace import Trace

EXTRA_TABLES = ("bitwise.csv", "timings.csv", "summary.json")  # beside the request and step tables


@dataclass(frozen=True)
class ExecuteReport:
    text: str  # what the command prints
    num_not_bit_exact: int  # requests whose outputs differ from the replay: the command exits 1 when any


def execute_report(
    trace: Trace, config: SimConfig, run: dict, out_dir: str | None, as_json: bool, table_format: str = "csv"
) -> ExecuteReport:
    """``run``: execute's keyword arguments (device, kernels, seed, shrink, warmup)."""
    if out_dir:  # every output path checked before the run, not after it
        check_table_outputs(out_dir, [config.policy], table_format, EXTRA_TABLES)
    result = execute(trace, config, **run)
    if out_dir:
        write_run(result, out_dir, table_format)
    text = _report_text(result, config, run, as_json)
    return ExecuteReport(text, int(result.summary["requests_not_bit_exact"]))


def _report_text(result: ExecuteResult, config: SimConfig, run: dict, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            dict(
                result.summary,
                policy=config.policy,
                model=config.model,
                device=run["device"],
                kernels=run["kernels"],
            )
        )
    return format_result(result, config, run["device"], run["kernels"])


def write_run(result: ExecuteResult, out_dir: str, table_format: str = "csv") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.summary.items()}
    atomic_write_many(
        {
            out / f"requests.{table_format}": table_bytes(result.request_times, table_format),
            out / f"steps.{table_format}": table_bytes(result.step_times, table_format),
            out / "summary.json": json.dumps(summary, indent=1, sort_keys=True) + "\n",
            out / EXTRA_TABLES[0]: csv_text(result.requests),
            out / EXTRA_TABLES[1]: csv_text(result.timings),
        }
    )


def _number(value: float) -> str:
    return "inf (a NaN output)" if value == float("inf") else f"{value:.3g}"


def format_result(result: ExecuteResult, config: SimConfig, device: str, kernels: str) -> str:
    s = result.summary
    warmup = "none" if s["warmup_s"] is None else f"{s['warmup_s']:.2f} s, apart"
    lines = [
        f"{config.policy} on the {config.model} model ({s['executed_model']}), {device}, {kernels} kernels",
        f"  requests checked                {s['requests_checked']} of {s['requests']}, {s['outputs_checked']} "
        f"outputs; {s['requests_reusing']} reused {s['cached_tokens']} cached tokens",
        f"  not bit-exact vs a replay       {s['requests_not_bit_exact']}  (0 for a correct policy)",
        f"  log-prob max |diff|             {_number(s['logprob_max_abs_diff'])}  "
        f"(KL max {_number(s['kl_max'])}, secondary)",
        f"  steps                           {s['steps']}  (warm-up: {warmup})",
        f"  step time: measured {s['measured_s']:.3f} s, predicted {s['predicted_s']:.3f} s, "
        f"MAPE {s['step_time_mape']:.1%}" + _mape_note(config, device),
        f"  makespan: measured {s['measured_makespan_s']:.3f} s, predicted {s['predicted_makespan_s']:.3f} s; "
        f"mean TTFT measured {s['measured_mean_ttft_s']:.3f} s, predicted {s['predicted_mean_ttft_s']:.3f} s",
        f"  measured throughput             {s['measured_tokens_per_s']:.1f} tokens/s",
    ]
    if s["requests_rejected"]:
        lines.append(
            f"  rejected (never served, not checked) {s['requests_rejected']}: "
            + ", ".join(s["rejected_ids"][:5])
            + (", ..." if s["requests_rejected"] > 5 else "")
        )
    if s["not_bit_exact_ids"]:
        lines.append("  not bit-exact: " + ", ".join(s["not_bit_exact_ids"]))
    if s["relies_on_freed_window_ids"]:
        lines.append(
            "  the simulator flags reads of freed SWA: " + ", ".join(s["relies_on_freed_window_ids"])
        )
    return "\n".join(lines)


def _mape_note(config: SimConfig, device: str) -> str:
    """Why a CPU run's step-time error is large and means nothing for the simulator's accuracy."""
    if device != "cpu" or config.calibration is not None:
        return ""
    return (
        "\n    (a CPU run: Triton's interpreter or the torch references, priced by the cpu preset's roofline; the"
        "\n    error says nothing of the simulator: `calibrate` fits this machine, docs/gpu-runs.md measures a GPU)"
    )
