"""A grid as a TOML file (``grid --config sweep.toml``), beside or instead of comma-list options::

    trace = "s1.jsonl"          # relative paths are taken from the file's folder
    out = "s1grid"
    mode = "timed"              # optional, as are calibration, jobs and slo ("ttft=2,tpot=0.1")
    [axes]                      # any grid axis: a list, or one value
    policy = ["sglang", "sglang-retain"]
    page_size = [64, 128]
    track_interval = [128, 256, 512]
    chunked_prefill_size = 16384
    window = ["none", 1024]     # "none" where a knob takes none

Options on the command line add to the file: a setting given there replaces the file's, an axis given in
both places is an error (which one was meant?). Errors name the file and the key.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from sim.grid.axes import AXIS_NAMES, parse_axis

SETTINGS = ("trace", "out", "mode", "calibration", "jobs", "slo")
PATH_SETTINGS = ("trace", "out", "calibration")
DEFAULTS = {"mode": "timed", "calibration": None, "jobs": None, "slo": None}


def load_grid_file(path: str | Path) -> tuple[dict, dict[str, str]]:
    """(settings, axis texts) of a grid file; ValueError naming the file and key for anything wrong."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - set(SETTINGS) - {"axes"})
    if unknown:
        raise ValueError(
            f"{path}: unknown key {unknown[0]!r}; a grid file has {', '.join(SETTINGS)} and [axes]"
        )
    settings = {name: data[name] for name in SETTINGS if name in data}
    for name in PATH_SETTINGS:
        if name in settings:
            if not isinstance(settings[name], str):
                raise ValueError(f"{path}: {name} must be a string (a path), got {settings[name]!r}")
            settings[name] = _relative_to(path, settings[name])
    jobs = settings.get("jobs")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"{path}: jobs must be an integer >= 1, got {jobs!r}")
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise ValueError(f"{path}: axes must be a table ([axes]), got {axes!r}")
    return settings, {name: _axis_text(path, name, value) for name, value in axes.items()}


def _relative_to(grid_file: Path, value: str) -> str:
    if value == "-" or Path(value).is_absolute():
        return value
    return str(grid_file.parent / value)


def _axis_text(path: Path, name: str, value: object) -> str:
    """A TOML value as the comma list the axis parses, checked here so the message names the file."""
    if name not in AXIS_NAMES:
        raise ValueError(f"{path}: [axes] {name}: unknown grid axis; known: {', '.join(AXIS_NAMES)}")
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, (list, dict)) for v in values):
        raise ValueError(f"{path}: [axes] {name}: give one value or a list of values, got {value!r}")
    text = ",".join(_item(v) for v in values)
    try:
        parse_axis(name, text)
    except ValueError as e:
        raise ValueError(f"{path}: [axes] {name}: {e}") from None
    return text


def _item(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


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
