"""A simulation's tables on disk: requests, steps (CSV or Parquet) and summary.json, written atomically.

Every CSV hybridcache writes goes through ``csv_text``: a text cell that a spreadsheet would run as a
formula (one starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return: a request id from a
trace is the user's) gets a leading ``'``, as OWASP advises; so does a cell that starts with ``'`` itself,
so that ``csv_read_back`` (drop one leading ``'``) gives the text back exactly. A negative number (``-5``,
an integer id written as text) is left as it is.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pandas as pd

from sim.atomic import atomic_write, atomic_write_many, check_output_dir
from sim.run.simulate import SimResult

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")
_NEGATIVE_NUMBER = re.compile(r"^-(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def write_tables(
    result: SimResult, out_dir: str, other: SimResult | None = None, table_format: str = "csv"
) -> list[Path]:
    """requests, steps (CSV or Parquet) and summary.json, atomically: plain names for one run; with a
    compared run, both runs' files carry their policy (``requests.sglang.csv``, ``requests.sglang-retain.csv``)."""
    out = Path(out_dir)
    runs = [result] if other is None else [result, other]
    names = table_names([run.config.policy for run in runs], table_format)
    check_table_outputs(out, [run.config.policy for run in runs], table_format)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str | os.PathLike, str | bytes] = {}
    for run, (requests, steps, summary) in zip(runs, names, strict=True):
        files[out / requests] = table_bytes(run.requests, table_format)
        files[out / steps] = table_bytes(run.steps, table_format)
        files[out / summary] = json.dumps(run.summary.as_dict(), indent=1, sort_keys=True) + "\n"
    return atomic_write_many(files)


def table_names(policies: list[str], table_format: str = "csv") -> list[tuple[str, str, str]]:
    """(requests, steps, summary) file names per run: plain for one run, each with its policy for two."""
    suffixes = [""] if len(policies) == 1 else [f".{policy}" for policy in policies]
    return [(f"requests{s}.{table_format}", f"steps{s}.{table_format}", f"summary{s}.json") for s in suffixes]


def check_table_outputs(
    out_dir: str | os.PathLike, policies: list[str], table_format: str = "csv", extra: tuple[str, ...] = ()
) -> None:
    """The output rule for every file ``write_tables`` (and ``extra``) will write in ``out_dir``: checked
    before the run, so that a FIFO there costs no simulation."""
    names = tuple(name for run_names in table_names(policies, table_format) for name in run_names)
    check_output_dir(out_dir, names + extra)


def table_bytes(frame: pd.DataFrame, table_format: str = "csv") -> str | bytes:
    """The table as CSV text or Parquet bytes."""
    if table_format != "parquet":
        return csv_text(frame)
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except ImportError as e:
        raise ValueError(f"--table-format parquet needs pyarrow: pip install -e '.[parquet]' ({e})") from None
    return buffer.getvalue()


def csv_text(frame: pd.DataFrame) -> str:
    """The table as CSV, its text cells safe to open in a spreadsheet (the module's docstring). Python's
    writer leaves a carriage return inside a cell unquoted (its line ends are "\n"), which would split the
    row: a table holding one has every text cell quoted."""
    safe = frame.copy(deep=False)
    carriage_return = False
    for name in frame.columns:
        if _is_text(frame[name]):
            safe[name] = frame[name].map(_neutralised)
            carriage_return |= bool(frame[name].map(lambda v: isinstance(v, str) and "\r" in v).any())
    return safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC if carriage_return else csv.QUOTE_MINIMAL)


def csv_read_back(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The text ``columns`` of a table read from ``csv_text``'s CSV, as they were before it was written."""
    for name in columns:
        if name in frame and _is_text(frame[name]):
            quoted = frame[name].map(lambda v: isinstance(v, str) and v.startswith("'")).astype(bool)
            if quoted.any():
                frame.loc[quoted, name] = frame.loc[quoted, name].map(lambda v: v[1:])
    return frame


def _is_text(column: pd.Series) -> bool:
    return column.dtype == object or pd.api.types.is_string_dtype(column.dtype)


def _neutralised(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NEGATIVE_NUMBER.match(value):
        return "'" + value
    return value


def write_table(frame: pd.DataFrame, stem: Path, table_format: str = "csv") -> Path:
    """``stem.csv`` or ``stem.parquet``, written atomically."""
    return atomic_write(stem.with_name(f"{stem.name}.{table_format}"), table_bytes(frame, table_format))
