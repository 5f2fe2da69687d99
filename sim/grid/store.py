"""The sweep's result store: one file set per point under DIR, each written atomically.

Layout::

    DIR/grid.json                     the latest sweep: trace, axes, point keys in order
    DIR/grid.csv                      one row per point: knobs + summary (+ status, error)
    DIR/points/<key>.json             config, resolved knobs and pool sizes, summary
    DIR/points/<key>.requests.csv     the per-request table
    DIR/points/<key>.steps.csv        the per-step table (pool occupancy over time)
    DIR/failed/<key>.json             a point that raised: its config and the error

A point's JSON is written last, after both CSVs, so its presence means the point is complete: a sweep
killed half-way leaves every finished point usable and no half-written one.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim.atomic import atomic_write, atomic_write_many

MANIFEST = "grid.json"


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
        elif not self.root.is_dir():
            raise ValueError(f"{self.root}: no such directory (run `cli.py grid --out {self.root}` first)")

    def point_path(self, key: str, suffix: str = ".json") -> Path:
        return self.points_dir / f"{key}{suffix}"

    def failure_path(self, key: str) -> Path:
        return self.failed_dir / f"{key}.json"

    def is_done(self, key: str) -> bool:
        return self.point_path(key).is_file()

    def write_point(self, record: dict, requests_csv: str, steps_csv: str) -> None:
        key = record["key"]
        # the JSON is renamed last: its presence means the point is complete
        atomic_write_many({self.point_path(key, ".requests.csv"): requests_csv,
                           self.point_path(key, ".steps.csv"): steps_csv, self.point_path(key): dump_json(record)})
        self.failure_path(key).unlink(missing_ok=True)  # an earlier failure of this point is now stale

    def write_failure(self, record: dict) -> None:
        atomic_write(self.failure_path(record["key"]), dump_json(record))

    def read_point(self, key: str) -> dict:
        return self._read_json(self.point_path(key))

    def read_failure(self, key: str) -> dict | None:
        path = self.failure_path(key)
        return self._read_json(path) if path.is_file() else None

    def read_requests(self, key: str) -> pd.DataFrame:
        """The per-request table with its types restored (CSV turns '' into NaN and bools into text)."""
        frame = pd.read_csv(self.point_path(key, ".requests.csv"), keep_default_na=False, na_values=[""],
                            dtype={"id": str, "session": str, "rejected": str})
        frame["rejected"] = frame["rejected"].fillna("")
        frame["followup"] = frame["followup"].astype(str) == "True"
        frame["decode_region_hit"] = frame["decode_region_hit"].map({"True": True, "False": False, True: True,
                                                                     False: False})
        return frame

    def read_steps(self, key: str) -> pd.DataFrame:
        return pd.read_csv(self.point_path(key, ".steps.csv"))

    def write_manifest(self, manifest: dict) -> None:
        atomic_write(self.root / MANIFEST, dump_json(manifest))

    def read_manifest(self) -> dict:
        path = self.root / MANIFEST
        if not path.is_file():
            raise ValueError(f"{self.root}: no {MANIFEST}; is this a `cli.py grid --out` directory?")
        return self._read_json(path)

    def write_table(self, frame: pd.DataFrame) -> Path:
        path = self.root / "grid.csv"
        atomic_write(path, frame.to_csv(index=False))
        return path

    @staticmethod
    def _read_json(path: Path) -> dict:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
