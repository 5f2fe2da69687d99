"""What ``cli.py execute`` and ``cli.py calibrate`` print and write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from executor.execute import ExecuteResult, execute
from sim.atomic import atomic_write_many
from sim.cost.calibration import fit_calibration, save_calibration
from sim.run.simulate import SimConfig
from sim.run.tables_io import write_tables
from sim.trace import Trace


@dataclass(frozen=True)
class ExecuteReport:
    text: str  # what the command prints
    num_not_bit_exact: int  # requests whose outputs differ from the replay: the command exits 1 when any


def execute_report(
    trace: Trace,
    config: SimConfig,
    device: str,
    kernels: str,
    seed: int,
    out_dir: str | None,
    as_json: bool,
    table_format: str = "csv",
) -> ExecuteReport:
    result = execute(trace, config, device=device, kernels=kernels, seed=seed)
    return ExecuteReport(
        _report_text(result, config, device, kernels, out_dir, as_json, table_format),
        int(result.summary["requests_not_bit_exact"]),
    )


def _report_text(result: ExecuteResult, config, device, kernels, out_dir, as_json, table_format) -> str:
    if out_dir:
        write_tables(result.measured, out_dir, table_format=table_format)
        atomic_write_many(
            {
                Path(out_dir) / "bitwise.csv": result.requests.to_csv(index=False),
                Path(out_dir) / "timings.csv": result.timings.to_csv(index=False),
            }
        )
    if as_json:
        return json.dumps(
            dict(result.summary, policy=config.policy, model=config.model, device=device, kernels=kernels)
        )
    return format_result(result, config, device, kernels)


def _number(value: float) -> str:
    return "inf (a NaN output)" if value == float("inf") else f"{value:.3g}"


def format_result(result: ExecuteResult, config: SimConfig, device: str, kernels: str) -> str:
    s = result.summary
    lines = [
        f"{config.policy} on the {config.model} model, {device}, {kernels} kernels",
        f"  requests checked                {s['requests_checked']} of {s['requests']}, {s['outputs_checked']} "
        f"outputs; {s['requests_reusing']} reused {s['cached_tokens']} cached tokens",
        f"  not bit-exact vs a replay       {s['requests_not_bit_exact']}  (0 for a correct policy)",
        f"  log-prob max |diff|             {_number(s['logprob_max_abs_diff'])}  "
        f"(KL max {_number(s['kl_max'])}, secondary)",
        f"  steps                           {s['steps']}",
        f"  step time: measured {s['measured_s']:.3f} s, predicted {s['predicted_s']:.3f} s, "
        f"MAPE {s['step_time_mape']:.1%}" + _mape_note(config, device),
        f"  throughput                      {s['tokens_per_s']:.1f} tokens/s",
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


def calibrate_from_run(
    trace: Trace, config: SimConfig, device: str, kernels: str, seed: int, output: str
) -> str:
    result = execute(trace, config, device=device, kernels=kernels, seed=seed)
    samples = [(t.shape, t.measured_s) for t in result.step_timings]
    if not samples:
        raise ValueError(
            f"calibrate: no step ran (all {len(trace)} requests were rejected by the pools: "
            "give larger --pool-tokens / --mamba-states)"
        )
    calibration = fit_calibration(samples, model=config.model, gpu=config.gpu)
    save_calibration(calibration, output)
    fit = calibration.fit
    held_out = (
        f"held-out MAPE {fit.holdout_mape:.1%} ({fit.num_folds} contiguous folds)"
        if fit.num_folds
        else "too few steps for a held-out error"
    )
    return (
        f"fitted {len(samples)} steps of {config.model} on {device} ({kernels}): overhead "
        f"{calibration.overhead_s * 1e3:.3f} ms; in-sample MAPE {fit.mape:.1%}, {held_out}; wrote {output}"
    )
