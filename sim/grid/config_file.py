"""A grid as a TOML file (``grid --config sweep.toml``), beside or instead of comma-list options::

    trace = "s1.jsonl"          # relative paths are taken from the file's folder
    out = "s1grid"
    mode = "timed"              # optional, as are calibration, jobs, max_points and slo ("ttft=2,tpot=0.1")
    [axes]                      # any grid axis: a list, or one value
    policy = ["sglang", "sglang-retain"]
    page_size = [64, 128]
    track_interval = [128, 256, 512]
    chunked_prefill_size = 16384
    window = ["none", 1024]     # "none" where a knob takes none

Options on the command line add to the file: a setting given there replaces the file's, an axis given in
both places is an error (which one was meant?). The file is read under the input rule (a regular file of
at most ``MAX_GRID_FILE_BYTES``, UTF-8), and every setting in it is checked even where the command line
replaces it. Errors read ``file:line: key: what is wrong``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sim.grid.axes import AXIS_NAMES, parse_axis
from sim.trace.files import read_document

SETTINGS = ("trace", "out", "mode", "calibration", "jobs", "max_points", "slo")
PATH_SETTINGS = ("trace", "out", "calibration")
COUNT_SETTINGS = ("jobs", "max_points")
MODES = ("timed", "replay")
DEFAULTS = {"mode": "timed", "calibration": None, "jobs": None, "max_points": None, "slo": None}
MAX_GRID_FILE_BYTES = 1 << 20  # a grid file of a megabyte is a list of about 100,000 values: not one meant


class GridFileError(ValueError):
    def __init__(self, path: Path, text: str, table: str | None, key: str, message: str):
        line = _line_of(text, table, key)
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {f'[{table}] ' if table else ''}{key}: {message}")


def load_grid_file(path: str | Path) -> tuple[dict, dict[str, str]]:
    """(settings, axis texts) of a grid file; ValueError naming the file, line and key for anything wrong."""
    path = Path(path)
    text = read_document(path, MAX_GRID_FILE_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        raise ValueError(f"{path}{f':{line.group(1)}' if line else ''}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - set(SETTINGS) - {"axes"})
    if unknown:
        raise GridFileError(
            path, text, None, unknown[0], f"unknown key; a grid file has {', '.join(SETTINGS)} and [axes]"
        )
    settings = {name: _setting(path, text, name, data[name]) for name in SETTINGS if name in data}
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise GridFileError(path, text, None, "axes", f"must be a table ([axes]), got {axes!r}")
    return settings, {name: _axis_text(path, text, name, value) for name, value in axes.items()}


def _setting(path: Path, text: str, name: str, value: object) -> object:
    if name in PATH_SETTINGS:
        if not isinstance(value, str) or not value:
            raise GridFileError(path, text, None, name, f"must be a path (a non-empty string), got {value!r}")
        return _relative_to(path, value)
    if name in COUNT_SETTINGS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise GridFileError(path, text, None, name, f"must be an integer >= 1, got {value!r}")
    if name == "mode" and value not in MODES:
        raise GridFileError(path, text, None, name, f"must be {' or '.join(map(repr, MODES))}, got {value!r}")
    return value


def _relative_to(grid_file: Path, value: str) -> str:
    if value == "-" or Path(value).is_absolute():
        return value
    return str(grid_file.parent / value)


def _axis_text(path: Path, text: str, name: str, value: object) -> str:
    """A TOML value as the comma list the axis parses, checked here so the message names the file."""
    if name not in AXIS_NAMES:
        raise GridFileError(path, text, "axes", name, f"unknown grid axis; known: {', '.join(AXIS_NAMES)}")
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, (list, dict)) for v in values):
        raise GridFileError(path, text, "axes", name, f"give one value or a list of values, got {value!r}")
    items = [_item(v) for v in values]
    if any("," in item for item in items):
        raise GridFileError(path, text, "axes", name, f"a value holds a comma: {value!r}")
    try:
        parse_axis(name, ",".join(items))
    except ValueError as e:
        raise GridFileError(path, text, "axes", name, str(e)) from None
    return ",".join(items)


def _item(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _line_of(text: str, table: str | None, key: str) -> int | None:
    """The line that sets ``key`` (in ``[table]``, or at the top), where it can be found."""
    current = None
    assignment = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    dotted = re.compile(rf"^\s*{re.escape(table)}\.{re.escape(key)}\s*=") if table else None
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1)
        elif (current == table and assignment.match(line)) or (
            current is None and dotted and dotted.match(line)
        ):
            return number
    return None


def merge_grid_file(
    config_path: str | None, given: dict, axis_texts: dict[str, str | None]
) -> tuple[dict, dict]:
    """The sweep's settings and axis texts from the grid file (if any) and the command line."""
    settings, axes = load_grid_file(config_path) if config_path else ({}, {})
    settings = DEFAULTS | settings | {k: v for k, v in given.items() if v is not None}
    both = sorted(name for name, text in axis_texts.items() if text is not None and name in axes)
    if both:
        flag = "--" + both[0].replace("_", "-")
        raise ValueError(f"{flag} is given on the command line and in {config_path}; give it in one place")
    for name in ("trace", "out"):
        if not settings.get(name):
            where = f" or {name} in the grid file" if config_path else " (or --config with a grid file)"
            raise ValueError(f"--{name} is required{where}")
    return settings, {**axes, **{k: v for k, v in axis_texts.items() if v is not None}}
