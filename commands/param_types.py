"""The command line's parameter types for what every command reads and writes, so that one rule holds for all
of them: numbers are taken as the user wrote them (no ``1_024``, no non-ASCII digits, which Python's
``int()`` and ``float()`` let through), and a path to write obeys the output rule (``sim/atomic.py``: a
regular file or a new path, a folder or a new path), checked as the option is parsed, before any work."""

from __future__ import annotations

import os
from pathlib import Path

import click

from sim.atomic import OutputPathError, check_output_dir, check_output_file
from sim.cache.knobs import parse_integer, parse_number


class Integer(click.IntRange):
    """click's ``IntRange``, with an integer written in ASCII decimal digits only."""

    name = "integer"
    # click converts through _number_class; ours refuses what int() would take beyond ASCII digits
    _number_class = staticmethod(parse_integer)  # type: ignore[assignment]


class Number(click.FloatRange):
    """click's ``FloatRange``, with a number written in ASCII (digits, point, exponent, inf, nan) only."""

    name = "float"
    _number_class = staticmethod(parse_number)  # type: ignore[assignment]


def strict(kind: object) -> click.ParamType | type | object:
    """The strict type for a Python annotation (``int``, ``float``); any other annotation as it is."""
    if kind is int:
        return Integer()
    return Number() if kind is float else kind


class OutputFile(click.Path):
    """A file to write: absent or a regular file, in an existing folder."""

    def __init__(self):
        super().__init__(dir_okay=False)

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        folder = Path(path).parent
        try:
            check_output_file(path)
            check_output_dir(folder)
        except (OutputPathError, OSError) as e:
            self.fail(str(e), param, ctx)
        if not folder.is_dir():
            self.fail(f"{path}: its folder {os.fspath(folder)} does not exist", param, ctx)
        return path


class OutputDir(click.Path):
    """A folder to write into: absent (it is made) or a directory."""

    def __init__(self):
        super().__init__(file_okay=False)

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        try:
            check_output_dir(path)
        except (OutputPathError, OSError) as e:
            self.fail(str(e), param, ctx)
        return path
