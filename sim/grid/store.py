"""The sweep's result store: one file set per point under DIR, each written atomically.

Layout::

    DIR/grid.json                     the latest sweep: trace, axes, point keys in order
    DIR/grid.csv                      one row per point: knobs + summary (+ status, error)
    DIR/points/<key>.json             config, resolved knobs and pool sizes, summary
    DIR/points/<key>.requests.csv     the per-request table
    DIR/points/<key>.steps.csv        the per-step table (pool occupancy over time)
    DIR/failed/<key>.json             a point that raised: its config and the error

A point's JSON is written last, after both CSVs, so its presence means the point is complete: a sweep
killed half-way leaves every finished point usable and no half-written one. Every file is read under the
input rule (``sim/trace/files.py``: a regular file, JSON read strictly) and checked (``store_checks.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim.atomic import atomic_write, atomic_write_many, check_output_dir, sweep_stale_temps
from sim.grid.points import key_problem
from sim.grid.store_checks import (
    StoreError,
    check_failure,
    check_manifest,
    check_point,
    check_requests,
    check_steps,
    read_csv,
)
from sim.run.tables_io import csv_read_back, csv_text
from sim.trace.checks import TraceError
from sim.trace.files import read_document
from sim.trace.strict_json import JSONError, loads

MANIFEST = "grid.json"
MAX_RECORD_BYTES = 64 << 20  # a manifest of a million point keys is 20 MB; a point's record a few kB
_TEXT_COLUMNS = ("id", "session", "rejected", "why")


def check_store_dir(root: str | Path) -> None:
    """The output rule for a store, before a sweep starts: the folder, what it writes at the top, and its
    points/ and failed/ folders."""
    check_output_dir(root, (MANIFEST, "grid.csv", "grid.parquet"))
    check_output_dir(Path(root) / "points")
    check_output_dir(Path(root) / "failed")


def dump_json(value: object) -> str:
    return json.dumps(value, indent=1, sort_keys=True, allow_nan=False) + "\n"


class PointStore:
    def __init__(self, root: str | Path, create: bool = False):
        self.root = Path(root)
        self.points_dir = self.root / "points"
        self.failed_dir = self.root / "failed"
        if create:
            self.points_dir.mkdir(parents=True, exist_ok=True)
            self.failed_dir.mkdir(parents=True, exist_ok=True)
            # a sweep killed between a temporary write and its rename left these; their writer is gone
            sweep_stale_temps(self.root, self.points_dir, self.failed_dir)
        elif not self.root.is_dir():
            raise ValueError(f"{self.root}: no such directory (run `cli.py grid --out {self.root}` first)")
        elif self.points_dir.exists() and not self.points_dir.is_dir():
            raise StoreError(self.points_dir, "is not a folder (a store keeps its point files in one)")

    def point_path(self, key: str, suffix: str = ".json") -> Path:
        return self.points_dir / f"{key}{suffix}"

    def failure_path(self, key: str) -> Path:
        return self.failed_dir / f"{key}.json"

    def is_done(self, key: str) -> bool:
        return self.point_path(key).is_file()

    def is_complete(self, key: str, trace_sha256: str) -> bool:
        """Done, its record is what a sweep writes and is the point ``key`` over this trace (a damaged or
        foreign one is recomputed, not trusted)."""
        try:
            return self.is_done(key) and key_problem(self.read_point(key), key, trace_sha256) is None
        except ValueError:
            return False

    def write_point(self, record: dict, requests_csv: str, steps_csv: str) -> None:
        key = record["key"]
        # the JSON is renamed last: its presence means the point is complete
        atomic_write_many(
            {
                self.point_path(key, ".requests.csv"): requests_csv,
                self.point_path(key, ".steps.csv"): steps_csv,
                self.point_path(key): dump_json(record),
            }
        )
        self.failure_path(key).unlink(missing_ok=True)  # an earlier failure of this point is now stale

    def write_failure(self, record: dict) -> None:
        atomic_write(self.failure_path(record["key"]), dump_json(record))

    def read_point(self, key: str) -> dict:
        path = self.point_path(key)
        return check_point(self._read_json(path), key, path)

    def read_failure(self, key: str) -> dict | None:
        path = self.failure_path(key)
        return check_failure(self._read_json(path), key, path) if path.is_file() else None

    def read_requests(self, key: str) -> pd.DataFrame:
        """The per-request table with its types restored (CSV turns '' into NaN and bools into text), checked
        against the point's summary."""
        path = self.point_path(key, ".requests.csv")
        frame = read_csv(
            path, keep_default_na=False, na_values=[""], dtype={"id": str, "session": str, "rejected": str}
        )
        check_requests(csv_read_back(frame, _TEXT_COLUMNS), self.read_point(key), path)
        frame["rejected"] = frame["rejected"].fillna("")
        frame["followup"] = frame["followup"].astype(str) == "True"
        frame["decode_region_hit"] = frame["decode_region_hit"].map(
            {"True": True, "False": False, True: True, False: False}
        )
        return frame

    def read_steps(self, key: str) -> pd.DataFrame:
        path = self.point_path(key, ".steps.csv")
        return check_steps(read_csv(path), self.read_point(key), path)

    def write_manifest(self, manifest: dict) -> None:
        atomic_write(self.root / MANIFEST, dump_json(manifest))

    def read_manifest(self) -> dict:
        path = self.root / MANIFEST
        if not path.is_file():
            raise ValueError(f"{self.root}: no {MANIFEST}; is this a `cli.py grid --out` directory?")
        return check_manifest(self._read_json(path), path)

    def write_table(self, frame: pd.DataFrame) -> Path:
        path = self.root / "grid.csv"
        atomic_write(path, csv_text(frame))
        return path

    @staticmethod
    def _read_json(path: Path) -> object:
        """A store's JSON file, strictly (sim/trace/strict_json.py); StoreError names its line and field."""
        try:
            return loads(read_document(path, MAX_RECORD_BYTES))
        except TraceError as e:  # not a regular file, too large, not UTF-8
            raise StoreError(path, e.message, e.line) from None
        except JSONError as e:
            raise StoreError(path, f"{e.field}: {e.message}", e.line) from None
