"""Integer rounding, the one place for it: a ceiling division, and positions rounded down or up to a multiple of
a unit (a page, a block, a grid)."""

from __future__ import annotations


def ceil_div(value: int, unit: int) -> int:
    """``ceil(value / unit)`` for integers, exactly (vLLM's and Triton's ``cdiv``)."""
    return -(-value // unit)


def floor_to(value: int, unit: int) -> int:
    return value // unit * unit


def ceil_to(value: int, unit: int) -> int:
    return ceil_div(value, unit) * unit
