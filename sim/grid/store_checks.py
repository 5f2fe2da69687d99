"""What a result store's files must hold before `report` (or a resumed sweep) trusts them.

A store outlives the sweep that wrote it: files get truncated, replaced by hand, copied from another grid.
Each reader checks the shape it needs, every field's type included (a manifest listing distinct point keys
and the trace's hash; a point record with its configuration, resolved knobs, code and a summary whose every
figure has the type ``Summary`` declares; tables with their columns and as many rows as the point's summary
says), and a ``StoreError`` names the bad file (and line, where one), what is wrong, and the way out: delete
the point's files and rerun. Whether a record is the point its key names is ``points.key_problem``'s.
"""

from __future__ import annotations

import math
import re
import typing
from pathlib import Path

import pandas as pd

from sim.run.metrics import POOL_COLUMNS
from sim.run.summary import Summary
from sim.sched.request import REQUEST_COLUMNS
from sim.trace.checks import is_int
from sim.trace.files import check_regular_file

_KEY = re.compile(r"^[0-9a-f]{16}$")  # points.KEY_LEN hex digits
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RERUN = "delete the point's files and rerun the grid to recompute it"
_NUMERIC_REQUEST_COLUMNS = (
    "prompt_tokens",
    "output_tokens",
    "cached_tokens",
    "full_depth",
    "blocked",
    "recomputed_tokens",
    "reuse_fraction",
    "retractions",
)
STEP_COLUMNS = ("step",) + POOL_COLUMNS  # the pool columns of both modes' step tables
# the summary figures a report reads in every store; the others are checked where present (older stores
# lack the figures added since)
REQUIRED_SUMMARY = (
    "requests",
    "num_steps",
    "followup_requests",
    "cached_tokens",
    "recomputed_tokens",
    "peak_full_slots",
    "peak_swa_slots",
    "peak_mamba_states",
    "mean_swa_slots",
    "mean_mamba_states",
)
_SUMMARY_TYPES = typing.get_type_hints(Summary)
_CONFIG_TEXT = ("policy", "model", "gpu", "mode")


class StoreError(ValueError):
    """A store file that is not what a sweep writes. ``str()`` reads ``path[:line]: what is wrong``."""

    def __init__(self, path: Path, message: str, line: int | None = None):
        self.path, self.line = path, line
        super().__init__(f"{path}{'' if line is None else f':{line}'}: {message}")


def check_manifest(data: object, path: Path) -> dict:
    if not isinstance(data, dict):
        raise StoreError(path, f"must hold a JSON object, got {type(data).__name__}")
    points, trace = data.get("points"), data.get("trace")
    if not isinstance(points, list) or not all(isinstance(k, str) and _KEY.match(k) for k in points):
        raise StoreError(path, "points: must be a list of point keys (16 hex digits)")
    if not points:
        raise StoreError(path, "points: lists no point; rerun the grid")
    first: dict[str, int] = {}  # key -> its first entry
    for index, key in enumerate(points):
        if key in first:
            raise StoreError(
                path, f"points: {key} is listed twice (entries {first[key] + 1} and {index + 1})"
            )
        first[key] = index
    if not isinstance(trace, dict) or not isinstance(trace.get("path"), str):
        raise StoreError(path, "trace: must be an object with the trace's 'path' and 'sha256'")
    if not isinstance(trace.get("sha256"), str) or not _SHA256.match(trace["sha256"]):
        raise StoreError(path, f"trace.sha256: must be 64 hex digits, got {trace.get('sha256')!r}")
    return data


def check_point(record: object, key: str, path: Path) -> dict:
    """A finished point: its key, configuration, resolved knobs, code and summary, every field typed.
    Summary figures this code does not know (a newer code's) are left out."""
    record = _check_record(record, key, path, ("config", "summary"))
    for name in ("resolved", "code", "trace", "key_parts"):
        if not isinstance(record.get(name, {}), dict):
            raise StoreError(path, f"{name}: must be an object; {_RERUN}")
    _check_scalars(record.get("resolved", {}), "resolved", path)
    _check_texts(record.get("code") or {}, ("version", "source_sha256", "git"), "code", path)
    _check_texts(record.get("trace", {}), ("path", "sha256"), "trace", path)
    if not isinstance(record.get("config_key", ""), str):
        raise StoreError(path, f"config_key: must be a text; {_RERUN}")
    record["summary"] = _checked_summary(record["summary"], path)
    return record


def check_failure(record: object, key: str, path: Path) -> dict:
    record = _check_record(record, key, path, ("config",))
    if not isinstance(record.get("error"), str):
        raise StoreError(path, "error: must be the failure's message")
    return record


def _check_record(record: object, key: str, path: Path, objects: tuple[str, ...]) -> dict:
    """``record``, a JSON object holding point ``key`` and an object for each name in ``objects``."""
    if not isinstance(record, dict):
        raise StoreError(path, f"must hold a JSON object, got {type(record).__name__}; {_RERUN}")
    if record.get("key") != key:
        raise StoreError(path, f"key: holds point {record.get('key')!r}, not {key!r}; {_RERUN}")
    for name in objects:
        if not isinstance(record.get(name), dict):
            raise StoreError(path, f"{name}: must be an object; {_RERUN}")
    config = record["config"]
    _check_texts(config, _CONFIG_TEXT, "config", path)
    if not isinstance(config.get("knobs", {}), dict):
        raise StoreError(path, f"config.knobs: must be an object; {_RERUN}")
    _check_scalars(config.get("knobs", {}), "config.knobs", path)
    return record


def _check_texts(fields: dict, names: tuple[str, ...], where: str, path: Path) -> None:
    for name in names:
        if name in fields and not isinstance(fields[name], str):
            raise StoreError(path, f"{where}.{name}: must be a text, got {fields[name]!r}; {_RERUN}")


def _check_scalars(fields: dict, where: str, path: Path) -> None:
    for name, value in fields.items():
        if value is not None and not isinstance(value, (str, int, float)):
            raise StoreError(path, f"{where}.{name}: must be a number or a text, got {value!r}; {_RERUN}")


def _checked_summary(summary: dict, path: Path) -> dict:
    for name in REQUIRED_SUMMARY:
        if name not in summary:
            raise StoreError(path, f"summary.{name}: missing; {_RERUN}")
    checked = {}
    for name, value in summary.items():
        hint = _SUMMARY_TYPES.get(name)
        if hint is None:
            continue
        if not _has_type(value, hint):
            raise StoreError(path, f"summary.{name}: must be {_type_words(hint)}, got {value!r}; {_RERUN}")
        checked[name] = value
    for name in ("requests", "num_steps"):
        if checked[name] < 0:
            raise StoreError(path, f"summary.{name}: must be a count, got {checked[name]!r}; {_RERUN}")
    return checked


def _has_type(value: object, hint: object) -> bool:
    kinds = typing.get_args(hint) or (hint,)
    if value is None:
        return type(None) in kinds
    if int in kinds and is_int(value):
        return True
    if float in kinds and (is_int(value) or (isinstance(value, float) and math.isfinite(value))):
        return True
    return str in kinds and isinstance(value, str)


def _type_words(hint: object) -> str:
    kinds = [k for k in typing.get_args(hint) or (hint,) if k is not type(None)]
    return {int: "an integer", float: "a number", str: "a text"}.get(kinds[0], str(hint))


def check_requests(frame: pd.DataFrame, record: dict, path: Path) -> pd.DataFrame:
    _check_table(frame, REQUEST_COLUMNS, record["summary"]["requests"], path)
    for name in _NUMERIC_REQUEST_COLUMNS:
        if not pd.api.types.is_numeric_dtype(frame[name]) or frame[name].isna().any():
            raise StoreError(path, f"column {name!r} must hold a number in every row; {_RERUN}")
    return frame


def check_steps(frame: pd.DataFrame, record: dict, path: Path) -> pd.DataFrame:
    _check_table(frame, STEP_COLUMNS, record["summary"]["num_steps"], path)
    return frame


def _check_table(frame: pd.DataFrame, columns, expected_rows: int, path: Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise StoreError(path, f"lacks the column(s) {', '.join(missing)}; {_RERUN}")
    if len(frame) != expected_rows:
        raise StoreError(
            path,
            f"holds {len(frame)} rows where the point's summary counts {expected_rows}: "
            f"truncated or replaced; {_RERUN}",
        )


def read_csv(path: Path, **options) -> pd.DataFrame:
    """A store table, read under the input rule (a regular file); an unreadable one is a StoreError."""
    try:
        check_regular_file(path, stream_hint=False)
        return pd.read_csv(path, **options)
    except FileNotFoundError:
        raise StoreError(path, f"missing (the point's JSON is there, its table is not); {_RERUN}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        message = getattr(e, "message", None) or str(e).strip()[:120]
        raise StoreError(path, f"not a readable CSV table ({message}); {_RERUN}") from None
