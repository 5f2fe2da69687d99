"""Fitting a calibration to measured step times: relative least squares with non-negative coefficients, the
in-sample error, the within-run folds and the error on another trace's run (``sim/cost/calibration.py`` says
what each figure means)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from sim.cost.calibration import Calibration, CalibrationFit, step_features
from sim.cost.shape import StepShape


def _nnls(features: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Non-negative least squares by trying every column subset: exact, and cheap for four columns."""
    scale = np.abs(features).max(axis=0)
    scale[scale == 0] = 1.0
    scaled = features / scale
    best, best_residual = np.zeros(features.shape[1]), float(np.sum(times**2))
    for size in range(1, features.shape[1] + 1):
        for columns in itertools.combinations(range(features.shape[1]), size):
            coef, *_ = np.linalg.lstsq(scaled[:, columns], times, rcond=None)
            if np.any(coef < 0):
                continue
            residual = float(np.sum((scaled[:, columns] @ coef - times) ** 2))
            if residual < best_residual:
                best = np.zeros(features.shape[1])
                best[list(columns)] = coef
                best_residual = residual
    return best / scale


def _check_samples(samples: list[tuple[StepShape, float]]) -> None:
    if not samples:
        raise ValueError("fit_calibration needs at least one (StepShape, seconds) sample")
    for index, (shape, seconds) in enumerate(samples):
        if not isinstance(shape, StepShape):
            raise ValueError(
                f"fit_calibration: samples[{index}] shape is {type(shape).__name__}, not StepShape"
            )
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
            raise ValueError(
                f"fit_calibration: samples[{index}] time must be a finite number > 0, got {seconds!r}"
            )


def _relative_fit(features: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Coefficients minimising the squared *relative* error, the quantity MAPE reports: every step counts
    alike, instead of the few long prefill steps outweighing hundreds of short decode steps."""
    return _nnls(features / times[:, None], np.ones_like(times))


def _mape(features: np.ndarray, times: np.ndarray, coef: np.ndarray) -> float:
    return float(np.mean(np.abs(features @ coef - times) / times))


def holdout_mape(features: np.ndarray, times: np.ndarray, num_folds: int) -> float:
    """Each of `num_folds` contiguous blocks of samples predicted by a fit on the others; the mean error.

    Contiguous, not interleaved: neighbouring steps of a run are near copies of each other, so an
    interleaved split would mostly test the fit on samples it has already seen."""
    errors = []
    for block in np.array_split(np.arange(len(times)), num_folds):
        rest = np.setdiff1d(np.arange(len(times)), block)
        coef = _relative_fit(features[rest], times[rest])
        errors.append(np.abs(features[block] @ coef - times[block]) / times[block])
    return float(np.mean(np.concatenate(errors)))


def fit_calibration(
    samples: list[tuple[StepShape, float]],
    *,
    model: str = "unknown",
    gpu: str = "unknown",
    num_folds: int = 4,
    held_out: list[tuple[StepShape, float]] | None = None,
    held_out_name: str = "",
) -> Calibration:
    """Relative least-squares coefficients (all >= 0) for measured (step shape, seconds) samples, the in-sample
    error, given at least two samples per fold the within-run held-out error, and given ``held_out`` (the
    steps of a run of another trace, named ``held_out_name``) the error on those."""
    _check_samples(samples)
    if isinstance(num_folds, bool) or not isinstance(num_folds, int) or num_folds < 2:
        raise ValueError(f"fit_calibration: num_folds must be an integer >= 2, got {num_folds!r}")
    features = np.array([step_features(shape) for shape, _ in samples], dtype=np.float64)
    times = np.array([seconds for _, seconds in samples], dtype=np.float64)
    coef = _relative_fit(features, times)
    fit = CalibrationFit(mape=_mape(features, times, coef), num_samples=len(samples))
    if len(samples) >= 2 * num_folds:
        fit = dataclasses.replace(
            fit, holdout_mape=holdout_mape(features, times, num_folds), num_folds=num_folds
        )
    if held_out:
        _check_samples(held_out)
        other = np.array([step_features(shape) for shape, _ in held_out], dtype=np.float64)
        other_times = np.array([seconds for _, seconds in held_out], dtype=np.float64)
        fit = dataclasses.replace(
            fit,
            trace_holdout_mape=_mape(other, other_times, coef),
            trace_holdout_samples=len(held_out),
            trace_holdout_name=held_out_name or "another trace",
        )
    overhead, prefill, decode, context = (float(c) for c in coef)
    return Calibration(model, gpu, overhead, prefill, decode, context, fit=fit)
