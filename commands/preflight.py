"""What a command checks before any work starts, so a long run never fails at its end for a reason known at
its start: an optional package an option needs (pyarrow for Parquet) and the paths it will write."""

from __future__ import annotations

import os
from pathlib import Path


def require_table_format(table_format: str) -> None:
    """``--table-format parquet`` needs pyarrow: refused now, not after the run."""
    if table_format != "parquet":
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ValueError(f"--table-format parquet needs pyarrow: pip install -e '.[parquet]' ({e})") from None


def writable_dir(path: str | os.PathLike, option: str) -> None:
    """A folder that exists or can be made, and can be written in."""
    wanted = Path(path)
    existing = next(p for p in (wanted, *wanted.absolute().parents) if p.exists())
    if not existing.is_dir():
        where = "" if existing == wanted else f": {existing} is a file"
        raise ValueError(f"{option} {path}: not a folder{where}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: {existing} is not writable")


def writable_file(path: str | os.PathLike, option: str) -> None:
    """A file that can be written (its folder exists or can be made; it is not a folder itself)."""
    wanted = Path(path)
    if wanted.is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    writable_dir(wanted.parent if str(wanted.parent) else Path("."), option)
