"""Markdown tables in the seeds' own shape, ready to paste into a pull request (``simulate``'s own view is
``reports/simulate_view.py``)."""

from __future__ import annotations

import math
import numbers
import re

import pandas as pd

from reports.escape import plain

KEY_COLUMNS = ("point", "points", "key")  # hash keys: monospace, never wrapped
SHORT_TEXT = 24  # a text column whose cells are all this short (policy names) is never wrapped either
_NUMERIC = re.compile(r"^[+\-]?[\d,.]+")  # a cell that starts with a number (also "94,016 -> 122,880")


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table: numbers right-aligned, text left-aligned, integers with thousands separators; every
    header and cell as plain text (``reports/escape.py``)."""
    columns = [[cell_text(v) for v in frame[name]] for name in frame.columns]
    kinds = [column_kind(name, cells) for name, cells in zip(frame.columns, columns, strict=True)]
    header = "| " + " | ".join(plain(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if kind == "num" else ":---" for kind in kinds) + "|"
    body = ["| " + " | ".join(plain(cells[i]) for cells in columns) + " |" for i in range(len(frame))]
    return "\n".join([header, rule] + body)


def column_kind(name: str, cells: list[str]) -> str:
    """``key`` (hash keys), ``num`` (every non-empty cell starts with a number), ``text short`` or ``text``."""
    if str(name) in KEY_COLUMNS:
        return "key"
    filled = [c for c in cells if c not in ("", "-", "n/a")]
    if filled and all(_NUMERIC.match(c) for c in filled):
        return "num"
    return "text short" if all(len(c) <= SHORT_TEXT for c in cells) else "text"


def cell_text(value) -> str:
    """Cells: integers with thousands separators, floats to 4 significant digits (never 1.2e+05)."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)
