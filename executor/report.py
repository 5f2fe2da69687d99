"""What ``cli.py execute`` and ``cli.py calibrate`` print and write."""
from __future__ import annotations

import json
from pathlib import Path

from executor.execute import ExecuteResult, execute
from sim.calibration import fit_calibration, save_calibration
from sim.simulate import SimConfig
from sim.simulate_cli import write_tables
from sim.trace import Trace


def execute_report(trace: Trace, config: SimConfig, device: str, kernels: str, seed: int,
                   out_dir: str | None, as_json: bool) -> str:
    result = execute(trace, config, device=device, kernels=kernels, seed=seed)
    if out_dir:
        write_tables(result.measured, out_dir)
        result.requests.to_csv(Path(out_dir) / "kl.csv", index=False)
        result.timings.to_csv(Path(out_dir) / "timings.csv", index=False)
    if as_json:
        return json.dumps(dict(result.summary, policy=config.policy, model=config.model, device=device,
                               kernels=kernels))
    return format_result(result, config, device, kernels)


def format_result(result: ExecuteResult, config: SimConfig, device: str, kernels: str) -> str:
    s = result.summary
    kl_max = "inf/NaN" if s["kl_max"] == float("inf") else f"{s['kl_max']:.3g}"
    lines = [
        f"{config.policy} on the {config.model} model, {device}, {kernels} kernels",
        f"  requests                        {s['requests']}",
        f"  cached tokens (predicted = run) {s['cached_tokens']}",
        f"  reuse mismatches                {s['reuse_mismatches']}  (must be 0)",
        f"  KL nonzero                      {s['kl_nonzero']}  max {kl_max}  (0 where reuse is correct)",
        f"  steps                           {s['steps']}",
        f"  step time: measured {s['measured_s']:.3f} s, predicted {s['predicted_s']:.3f} s, "
        f"MAPE {s['step_time_mape']:.1%}",
        f"  throughput                      {s['tokens_per_s']:.1f} tokens/s",
    ]
    if s["kl_nonzero_ids"]:
        lines.append("  requests with nonzero KL: " + ", ".join(s["kl_nonzero_ids"]))
    return "\n".join(lines)


def calibrate_from_run(trace: Trace, config: SimConfig, device: str, kernels: str, seed: int, output: str) -> str:
    result = execute(trace, config, device=device, kernels=kernels, seed=seed)
    samples = [(t.shape, t.measured_s) for t in result.step_timings]
    calibration = fit_calibration(samples, model=config.model, gpu=config.gpu)
    save_calibration(calibration, output)
    return (f"fitted {len(samples)} steps of {config.model} on {device} ({kernels}): overhead "
            f"{calibration.overhead_s * 1e3:.3f} ms, MAPE {calibration.fit.mape:.1%}; wrote {output}")
