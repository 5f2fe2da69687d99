"""A simulation's tables on disk: requests, steps (CSV or Parquet) and summary.json, written atomically."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd

from sim.atomic import atomic_write, atomic_write_many
from sim.run.simulate import SimResult


def write_tables(
    result: SimResult, out_dir: str, other: SimResult | None = None, table_format: str = "csv"
) -> list[Path]:
    """requests, steps (CSV or Parquet) and summary.json, atomically: plain names for one run; with a
    compared run, both runs' files carry their policy (``requests.sglang.csv``, ``requests.sglang-retain.csv``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = [result] if other is None else [result, other]
    files: dict[str | os.PathLike, str | bytes] = {}
    for run in runs:
        suffix = "" if other is None else f".{run.config.policy}"
        for name, frame in (("requests", run.requests), ("steps", run.steps)):
            files[out / f"{name}{suffix}.{table_format}"] = table_bytes(frame, table_format)
        files[out / f"summary{suffix}.json"] = (
            json.dumps(run.summary.as_dict(), indent=1, sort_keys=True) + "\n"
        )
    return atomic_write_many(files)


def table_bytes(frame: pd.DataFrame, table_format: str = "csv") -> str | bytes:
    """The table as CSV text or Parquet bytes."""
    if table_format != "parquet":
        return frame.to_csv(index=False)
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except ImportError as e:
        raise ValueError(f"--table-format parquet needs pyarrow: pip install -e '.[parquet]' ({e})") from None
    return buffer.getvalue()


def write_table(frame: pd.DataFrame, stem: Path, table_format: str = "csv") -> Path:
    """``stem.csv`` or ``stem.parquet``, written atomically."""
    return atomic_write(stem.with_name(f"{stem.name}.{table_format}"), table_bytes(frame, table_format))
