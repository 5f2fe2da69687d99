"""``cli.py calibrate``: the cost model's coefficients fitted to measured step times, and its error on a
*different* trace's run (the held-out figure: steps of the fitted run itself would flatter it).

The steps come from executing a trace now, or from ``execute --out`` folders written earlier (their
``timings.csv`` holds each step's shape and measured time), so a GPU check fits on the runs it already made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pandas as pd

from executor.execute import execute
from sim.cost import StepShape
from sim.cost.calibration import CalibrationFit, save_calibration
from sim.cost.calibration_fit import fit_calibration
from sim.run.simulate import SimConfig
from sim.trace import Trace

Samples = list[tuple[StepShape, float]]


def executed_samples(trace: Trace, config: SimConfig, run: dict) -> Samples:
    result = execute(trace, config, **run)
    return [(t.shape, t.measured_s) for t in result.step_timings]


def run_samples(folder: str) -> Samples:
    """The steps an ``execute --out`` folder recorded (its ``timings.csv``)."""
    path = Path(folder) / "timings.csv"
    try:
        table = pd.read_csv(path)
        return [
            (StepShape(tuple(map(tuple, json.loads(p))), tuple(json.loads(d))), float(m))
            for p, d, m in zip(
                table["prefill_chunks"], table["decode_contexts"], table["measured_s"], strict=True
            )
        ]
    except (OSError, KeyError, ValueError) as err:
        raise ValueError(f"{path}: not an `execute --out` timings table ({err})") from None


def calibrate(
    fit: Samples, held_out: Samples | None, held_out_name: str, config: SimConfig, output: str
) -> str:
    if not fit:
        raise ValueError(
            "calibrate: no step ran (every request was rejected by the pools: give larger --pool-tokens / "
            "--mamba-states)"
        )
    calibration = fit_calibration(
        fit, model=config.model, gpu=config.gpu, held_out=held_out, held_out_name=held_out_name
    )
    save_calibration(calibration, output)
    f = cast(CalibrationFit, calibration.fit)  # fit_calibration always records how well it fits
    held = (
        f"held-out MAPE {f.trace_holdout_mape:.1%} on {f.trace_holdout_samples} steps of {held_out_name}"
        if f.trace_holdout_samples
        else "no held-out trace (give --holdout-trace or --holdout-run)"
    )
    return (
        f"fitted {len(fit)} steps of {config.model}: overhead {calibration.overhead_s * 1e3:.3f} ms; "
        f"in-sample MAPE {f.mape:.1%}, {held}; wrote {output}"
    )
