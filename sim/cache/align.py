"""Page arithmetic: positions rounded down or up to a multiple of a unit."""

from __future__ import annotations


def floor_to(value: int, unit: int) -> int:
    return value // unit * unit


def ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit
