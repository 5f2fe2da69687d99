"""Calibration files: measured step times fitted to a linear model that overrides the roofline.

time = overhead_s + s_per_prefill_token * prefill tokens + s_per_decode_token * decode tokens
       + s_per_context_token * attended context (keys attended, summed over the step's tokens)

The file is JSON:
  {"model": "small", "gpu": "h200", "overhead_s": ..., "s_per_prefill_token": ..., "s_per_decode_token": ...,
   "s_per_context_token": ..., "fit": {"mape": ..., "num_samples": ..., "holdout_mape": ..., "num_folds": ...}}
"fit" is optional. "mape" is in-sample (the error on the samples the coefficients came from); "holdout_mape"
and "num_folds" (optional, together): the run's steps cut into `num_folds` contiguous blocks, each block's
error predicted by coefficients fitted on the other blocks (neighbouring steps of one run look alike, so
this still flatters the fit); "trace_holdout_mape", "trace_holdout_samples" and "trace_holdout_name"
(optional, together) are the honest figure: the error of the fitted coefficients on the steps of a run of
a different trace. The file is read under the input rule and strictly
(``sim/trace/files.py``); the fit is ``sim/cost/calibration_fit.py``'s.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np

from sim.atomic import atomic_write
from sim.cost.shape import StepShape
from sim.trace.checks import TraceError, shown
from sim.trace.files import read_document
from sim.trace.strict_json import JSONError, loads

COEFFICIENTS = ("overhead_s", "s_per_prefill_token", "s_per_decode_token", "s_per_context_token")
_FIELDS = ("model", "gpu", *COEFFICIENTS, "fit")


@dataclass(frozen=True)
class CalibrationFit:
    mape: float  # in-sample mean absolute percentage error, as a fraction (0.05 = 5%)
    num_samples: int
    holdout_mape: float | None = None  # the same over samples held out of the fit (contiguous folds)
    num_folds: int | None = None
    trace_holdout_mape: float | None = None  # the same over the steps of a run of another trace
    trace_holdout_samples: int | None = None
    trace_holdout_name: str | None = None


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
_TRACE_KEYS = {"trace_holdout_mape", "trace_holdout_samples", "trace_holdout_name"}


def _count(value: object, field: str, path: str | Path, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        _reject(path, field, f"must be an integer >= {least}, got {value!r}")
    return value


def _fit(data: dict, path: str | Path) -> CalibrationFit | None:
    fit = data.get("fit")
    if fit is None:
        return None
    allowed = [_FIT_KEYS | more | trace for more in (set(), _HOLDOUT_KEYS) for trace in (set(), _TRACE_KEYS)]
    if not isinstance(fit, dict) or set(fit) not in allowed:
        _reject(
            path,
            "fit",
            f"must be an object with 'mape' and 'num_samples' (and optionally both "
            f"'holdout_mape' and 'num_folds', and all of {', '.join(sorted(_TRACE_KEYS))}), got {fit!r}",
        )
    count = _count(fit["num_samples"], "fit.num_samples", path, 1)
    holdout = folds = None
    if "num_folds" in fit:
        holdout = _number(fit["holdout_mape"], "fit.holdout_mape", path)
        folds = _count(fit["num_folds"], "fit.num_folds", path, 2)
    read = CalibrationFit(_number(fit["mape"], "fit.mape", path), count, holdout, folds)
    if "trace_holdout_mape" not in fit:
        return read
    return dataclasses.replace(
        read,
        trace_holdout_mape=_number(fit["trace_holdout_mape"], "fit.trace_holdout_mape", path),
        trace_holdout_samples=_count(fit["trace_holdout_samples"], "fit.trace_holdout_samples", path, 1),
        trace_holdout_name=_text(fit["trace_holdout_name"], "fit.trace_holdout_name", path),
    )


MAX_CALIBRATION_BYTES = 1 << 20  # a calibration file holds a dozen numbers


def _read_object(path: str | Path) -> dict:
    """The file's JSON object, read under the input rule and strictly (sim/trace/files.py)."""
    try:
        data = loads(read_document(path, MAX_CALIBRATION_BYTES))
    except OSError as err:
        raise ValueError(f"calibration file {str(path)!r}: cannot read: {err.strerror}") from err
    except TraceError as err:  # not a regular file, too large, not UTF-8
        where = "" if err.line is None else f" line {err.line}:"
        raise ValueError(f"calibration file {str(path)!r}:{where} {err.message}") from err
    except JSONError as err:
        raise ValueError(
            f"calibration file {str(path)!r}: line {err.line}: {err.field}: not valid JSON: {err.message}"
        ) from err
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
    else:
        for key in ("holdout_mape", "num_folds", *sorted(_TRACE_KEYS)):
            if data["fit"][key] is None:
                del data["fit"][key]
    atomic_write(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
