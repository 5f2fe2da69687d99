"""What a heatmap draws: the three reuse metrics over the requests in scope, how each reads a point, writes a
cell (full and short), a difference and a colour-bar tick."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from reports.formatting import abbreviated, count
from reports.grid_data import FOLLOWUP, SCOPED

HITS, REQUESTS = SCOPED + "hits", SCOPED + "requests"


@dataclass(frozen=True)
class Metric:
    name: str  # file-name stem
    column: str  # the points' column it draws (grid_data's scoped figures)
    label: str  # the figure's title, with its unit
    short: str  # colour-bar label
    fraction: bool  # coloured on the fixed 0..1 scale

    @property
    def is_hits(self) -> bool:
        return self.column == HITS

    def value(self, row: pd.Series) -> float:
        if self.is_hits:
            return row[HITS] / row[REQUESTS] if row[REQUESTS] else math.nan
        return float(row[self.column])

    def count(self, row: pd.Series) -> float:
        """What a difference panel writes in a cell: hit counts (+16), not fractions of them."""
        return float(row[HITS]) if self.is_hits else self.value(row)

    def cell(self, row: pd.Series) -> str:
        if self.is_hits:
            return f"{count(row[HITS])}/{count(row[REQUESTS])}"
        return f"{100 * row[self.column]:.1f}%" if self.fraction else count(row[self.column])

    def short_cell(self, row: pd.Series) -> str:
        """The cell when the full number does not fit: ``94k``, ``1489/\n1500``."""
        if not self.fraction:
            return abbreviated(row[self.column], 3)
        return self.cell(row).replace("/", "/\n", 1)

    def difference(self, value: float, short: bool = False) -> str:
        if math.isnan(value):
            return "n/a"
        if value == 0:
            return "0"
        sign = "+" if value > 0 else "-"
        if self.fraction and not self.is_hits:
            return f"{sign}{100 * abs(value):.1f}" + ("" if short else " pp")
        return sign + (abbreviated(abs(value), 3) if short else count(abs(value)))

    def tick(self, value: float, difference: bool = False, span: float = 1.0) -> str:
        """Colour-bar ticks: percentages (points, for differences) with as many decimals as the span needs."""
        if self.fraction:
            digits = 0 if span >= 0.1 else 1 if span >= 0.01 else 2
            if difference:
                return "0" if value == 0 else f"{100 * value:+.{digits}f} pp"
            return f"{100 * value:.{digits}f}%"
        return ("+" if difference and value > 0 else "") + abbreviated(value, 3)


def metrics(scope: str) -> list[Metric]:
    hits = "decode-region hits" if scope == FOLLOWUP else "requests with a hit"
    return [
        Metric("hits", HITS, f"{hits} (n/N)", f"{hits} (share)", True),
        Metric("reused_tokens", SCOPED + "cached_tokens", "reused (cached) tokens", "reused tokens", False),
        Metric(
            "mean_reuse",
            SCOPED + "mean_reuse_fraction",
            "mean reuse fraction (cached / prompt tokens)",
            "mean reuse",
            True,
        ),
    ]
