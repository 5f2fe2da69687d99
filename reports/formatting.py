"""Numbers as people read them in a pull request: thousands separators, percentages, seconds, changes."""

from __future__ import annotations

import math


def count(value) -> str:
    """``121728`` -> ``121,728``; a whole float prints as an integer; None or NaN -> ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def percent(fraction: float, digits: int = 1) -> str:
    """``0.9541`` -> ``95.4%``."""
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "-"
    return f"{100 * fraction:.{digits}f}%"


def share(part, whole, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole`` (``-`` when there is no whole)."""
    return percent(part / whole, digits) if whole else "-"


def used_of(used, capacity, unit: str = "") -> str:
    """``811,584 / 2,000,000 tokens (40.6%)`` (no unit where the label gives it); a pool that does not exist
    reads ``no pool``."""
    if not capacity:
        return "no pool"
    return f"{count(used)} / {count(capacity)}{' ' + unit if unit else ''} ({share(used, capacity)})"


def seconds(value: float) -> str:
    """Latencies and makespans: three significant figures, never scientific notation."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{min(digits, 6)}f}"


def fraction(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def change(before, after, digits: int = 1) -> str:
    """``+28,672 (+30.4%)``; ``0`` when nothing changed."""
    if before is None or after is None:
        return "-"
    diff = after - before
    if diff == 0:
        return "0"
    sign = "+" if diff > 0 else "-"
    text = sign + (count(abs(diff)) if float(diff).is_integer() else seconds(abs(diff)))
    return text + (f" ({diff / before:+.{digits}%})" if before else "")


def delta(before, after) -> str:
    """``-11.1``, ``+3``, ``0``: a change without its percentage, where several sit in one cell."""
    return change(before, after).split(" (")[0]


def abbreviated(value: float, digits: int = 4) -> str:
    """Axis ticks, where room is short: 124416 -> 124.4k, 4000000 -> 4M, 98.25 stays 98.25."""
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.{digits}g}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:.{digits}g}k"
    return f"{value:g}"
