"""What a result store's files must hold before `report` (or a resumed sweep) trusts them.

A store outlives the sweep that wrote it: files get truncated, replaced by hand, copied half-way. Each
reader checks the shape it needs (a manifest listing point keys, a point record with its configuration
and summary, tables with their columns and as many rows as the point's summary says) and a ValueError
names the bad file and what is wrong with it, with the way out: delete the point's files and rerun.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from sim.run.metrics import POOL_COLUMNS
from sim.sched.request import REQUEST_COLUMNS

_KEY = re.compile(r"^[0-9a-f]{16}$")  # points.KEY_LEN hex digits
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


class StoreError(ValueError):
    """A store file that is not what a sweep writes. ``str()`` reads ``path: what is wrong``."""

    def __init__(self, path: Path, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


def check_manifest(data: object, path: Path) -> dict:
    if not isinstance(data, dict):
        raise StoreError(path, f"must hold a JSON object, got {type(data).__name__}")
    points, trace = data.get("points"), data.get("trace")
    if not isinstance(points, list) or not all(isinstance(k, str) and _KEY.match(k) for k in points):
        raise StoreError(path, "'points' must be a list of point keys (16 hex digits)")
    if not isinstance(trace, dict) or not isinstance(trace.get("path"), str):
        raise StoreError(path, "'trace' must be an object with the trace's 'path' and 'sha256'")
    return data


def check_point(record: object, key: str, path: Path) -> dict:
    """A finished point: its key, configuration, resolved knobs and summary."""
    _check_record(record, key, path, ("config", "summary"))
    if not isinstance(record.get("resolved", {}), dict):
        raise StoreError(path, f"'resolved' must be an object; {_RERUN}")
    for name in ("requests", "num_steps"):
        value = record["summary"].get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise StoreError(path, f"summary.{name} must be a count, got {value!r}; {_RERUN}")
    return record


def check_failure(record: object, key: str, path: Path) -> dict:
    _check_record(record, key, path, ("config",))
    if not isinstance(record.get("error"), str):
        raise StoreError(path, "'error' must be the failure's message")
    return record


def _check_record(record: object, key: str, path: Path, objects: tuple[str, ...]) -> None:
    if not isinstance(record, dict):
        raise StoreError(path, f"must hold a JSON object, got {type(record).__name__}; {_RERUN}")
    if record.get("key") != key:
        raise StoreError(path, f"holds point {record.get('key')!r}, not {key!r}; {_RERUN}")
    for name in objects:
        if not isinstance(record.get(name), dict):
            raise StoreError(path, f"{name!r} must be an object; {_RERUN}")


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
    """A store table; an unreadable one is a StoreError naming it."""
    try:
        return pd.read_csv(path, **options)
    except FileNotFoundError:
        raise StoreError(path, f"missing (the point's JSON is there, its table is not); {_RERUN}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        raise StoreError(path, f"not a readable CSV table ({str(e).strip()[:120]}); {_RERUN}") from None
