"""Calibration files: measured step times fitted to a linear model that overrides the roofline.

time = overhead_s + s_per_prefill_token * prefill tokens + s_per_decode_token * decode tokens
       + s_per_context_token * attended context (keys attended, summed over the step's tokens)

The file is JSON:
  {"model": "small", "gpu": "h200", "overhead_s": ..., "s_per_prefill_token": ..., "s_per_decode_token": ...,
   "s_per_context_token": ..., "fit": {"mape": ..., "num_samples": ..., "holdout_mape": ..., "num_folds": ...}}
"fit" is optional. "mape" is in-sample (the error on the samples the coefficients came from); "holdout_mape"
and "num_folds" (optional, together) are the honest figure: the run's steps cut into `num_folds` contiguous
blocks, each block's error predicted by coefficients fitted on the other blocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np

from sim.atomic import atomic_write
from sim.cost.shape import StepShape
from sim.trace.checks import TraceError, shown
from sim.trace.files import check_regular_file

COEFFICIENTS = ("overhead_s", "s_per_prefill_token", "s_per_decode_token", "s_per_context_token")
_FIELDS = ("model", "gpu", *COEFFICIENTS, "fit")


@dataclass(frozen=True)
class CalibrationFit:
    mape: float  # in-sample mean absolute percentage error, as a fraction (0.05 = 5%)
    num_samples: int
    holdout_mape: float | None = None  # the same over samples held out of the fit (contiguous folds)
    num_folds: int | None = None


@dataclass(frozen=True)
class Calibration:
    model: str
    gpu: str
    overhead_s: float
    s_per_prefill_token: float
    s_per_decode_token: float
    s_per_context_token: float
    fit: CalibrationFit | None = None

    def coefficients(self) -> tuple[float, float, float, float]:
        return self.overhead_s, self.s_per_prefill_token, self.s_per_decode_token, self.s_per_context_token

    def predict_s(self, shape: StepShape) -> float:
        return float(np.dot(self.coefficients(), step_features(shape)))


def step_features(shape: StepShape) -> tuple[float, float, float, float]:
    """The linear model's regressors for one step, the constant first."""
    return (
        1.0,
        float(shape.num_prefill_tokens),
        float(shape.num_decode_tokens),
        float(shape.attended_context()),
    )


# ---- file format ----


def _reject(path: str | Path, field: str, message: str) -> NoReturn:
    raise ValueError(f"calibration file {str(path)!r}: field {field!r} {message}")


# no real step takes a minute of fixed overhead or a second per token: larger is a unit mistake, and 1e300
# would overflow the predicted times to inf
_MAXIMUM = {
    "overhead_s": 60.0,
    "s_per_prefill_token": 1.0,
    "s_per_decode_token": 1.0,
    "s_per_context_token": 1.0,
}


def _number(value: object, field: str, path: str | Path) -> float:
    maximum = _MAXIMUM.get(field, 1e6)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= maximum:
        _reject(path, field, f"must be a finite number in [0, {maximum:g}], got {shown(value)}")
    return float(value)


def _text(value: object, field: str, path: str | Path) -> str:
    if not isinstance(value, str) or not value:
        _reject(path, field, f"must be a non-empty string, got {value!r}")
    return value


_FIT_KEYS = {"mape", "num_samples"}
_HOLDOUT_KEYS = {"holdout_mape", "num_folds"}


def _count(value: object, field: str, path: str | Path, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        _reject(path, field, f"must be an integer >= {least}, got {value!r}")
    return value


def _fit(data: dict, path: str | Path) -> CalibrationFit | None:
    fit = data.get("fit")
    if fit is None:
        return None
    if not isinstance(fit, dict) or set(fit) not in (_FIT_KEYS, _FIT_KEYS | _HOLDOUT_KEYS):
        _reject(
            path,
            "fit",
            f"must be an object with 'mape' and 'num_samples' (and optionally both "
            f"'holdout_mape' and 'num_folds'), got {fit!r}",
        )
    count = _count(fit["num_samples"], "fit.num_samples", path, 1)
    holdout = folds = None
    if "num_folds" in fit:
        holdout = _number(fit["holdout_mape"], "fit.holdout_mape", path)
        folds = _count(fit["num_folds"], "fit.num_folds", path, 2)
    return CalibrationFit(_number(fit["mape"], "fit.mape", path), count, holdout, folds)


def _read_object(path: str | Path) -> dict:
    try:
        check_regular_file(path)
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ValueError(f"calibration file {str(path)!r}: cannot read: {err.strerror}") from err
    except TraceError as err:
        raise ValueError(f"calibration file {str(path)!r}: {err.message}") from err
    except (ValueError, RecursionError) as err:  # JSON, UTF-8, a number too long to read, deep nesting
        raise ValueError(f"calibration file {str(path)!r}: not valid JSON: {str(err)[:200]}") from err
    if not isinstance(data, dict):
        raise ValueError(
            f"calibration file {str(path)!r}: must hold a JSON object, got {type(data).__name__}"
        )
    return data


def load_calibration(path: str | Path) -> Calibration:
    data = _read_object(path)
    for field in sorted(set(data) - set(_FIELDS)):
        _reject(path, field, f"is not a calibration field (known: {', '.join(_FIELDS)})")
    for field in _FIELDS[:-1]:
        if field not in data:
            _reject(path, field, "is missing")
    numbers = {field: _number(data[field], field, path) for field in COEFFICIENTS}
    return Calibration(
        model=_text(data["model"], "model", path),
        gpu=_text(data["gpu"], "gpu", path),
        **numbers,
        fit=_fit(data, path),
    )


def save_calibration(calibration: Calibration, path: str | Path) -> None:
    data = dataclasses.asdict(calibration)
    if data["fit"] is None:
        del data["fit"]
    elif data["fit"]["num_folds"] is None:
        del data["fit"]["holdout_mape"], data["fit"]["num_folds"]
    atomic_write(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


# ---- fitting ----


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
) -> Calibration:
    """Relative least-squares coefficients (all >= 0) for measured (step shape, seconds) samples, the in-sample
    error and, given at least two samples per fold, the held-out error."""
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
    overhead, prefill, decode, context = (float(c) for c in coef)
    return Calibration(model, gpu, overhead, prefill, decode, context, fit=fit)
