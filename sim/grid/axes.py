"""The axes of a sweep: every simulate knob and pool option as a list, and their cartesian product.

A grid is given as comma lists (``--page-size 64,128``); each axis parses its list here so that bad
input is rejected before anything runs, with the option and the offending item named.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.cache.knobs import NONE, KnobSpec
from sim.cost import GPUS
from sim.engines.registry import CLI_KNOBS, policy_names
from sim.models import MODELS
from sim.run.config import POOL_KNOBS, SimConfig

KNOB = "knob"  # a policy knob: goes into SimConfig.knobs
CONFIG = "config"  # a SimConfig field (policy, model, gpu, pool options)


@dataclass(frozen=True)
class Axis:
    name: str  # SimConfig field or policy knob name
    kind: str  # KNOB or CONFIG
    parse: Callable[[str], object]  # one item of the comma list -> value; ValueError says what is wrong
    help: str = ""
    default_text: str = ""  # what a point takes when the axis is not given

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _choice(what: str, choices: Callable[[], list[str]]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices():
            raise ValueError(f"unknown {what} {text!r}; choose from {', '.join(choices())}")
        return text

    return parse


def _from_schema(spec: KnobSpec, kind: str) -> Axis:
    if kind == KNOB:
        default = "the preset's"
    else:
        value = SimConfig.__dataclass_fields__[spec.name].default
        default = f"none: {spec.none_means}" if value is None else str(value)
    return Axis(spec.name, kind, spec.parse, spec.describe(), default)


# Outermost first: the policy is innermost so that a grid's rows put each setting's policies side by side.
AXES: tuple[Axis, ...] = (
    Axis("model", CONFIG, _choice("model", lambda: sorted(MODELS)), "model presets", SimConfig.model),
    Axis("gpu", CONFIG, _choice("GPU", lambda: sorted(GPUS)), "GPU presets", SimConfig.gpu),
    *(_from_schema(spec, KNOB) for spec in CLI_KNOBS.values()),
    *(_from_schema(spec, CONFIG) for spec in POOL_KNOBS.values()),
    Axis("policy", CONFIG, _choice("policy", policy_names), "policy presets", SimConfig.policy),
)
AXIS_NAMES = tuple(axis.name for axis in AXES)
KNOB_NAMES = tuple(axis.name for axis in AXES if axis.kind == KNOB)
_BY_NAME = {axis.name: axis for axis in AXES}


def parse_axis(name: str, text: str) -> list:
    """``"64,128"`` -> ``[64, 128]`` for axis ``name``; empty lists, empty items and repeats are errors."""
    axis = _BY_NAME.get(name)
    if axis is None:
        raise ValueError(f"unknown grid axis {name!r}; known: {', '.join(AXIS_NAMES)}")
    items = [item.strip() for item in text.split(",")]
    if items == [""]:
        raise ValueError(f"{axis.flag}: empty list; give one or more values separated by commas")
    values = []
    for position, item in enumerate(items, start=1):
        if not item:
            raise ValueError(f"{axis.flag}: item {position} of {text!r} is empty")
        try:
            value = axis.parse(item)
        except ValueError as e:
            raise ValueError(f"{axis.flag}: item {position}: {e}") from None
        if value in values:
            raise ValueError(f"{axis.flag}: {item!r} appears more than once in {text!r}")
        values.append(value)
    return values


def parse_axes(texts: dict[str, str | None]) -> dict[str, list]:
    """Every given (non-None) option text parsed; axes not given are left out (SimConfig's default)."""
    return {name: parse_axis(name, text) for name, text in texts.items() if text is not None}


# Each point is a full simulation (a second to minutes) and three files in the store; the largest grids of
# the docs have 24 points. Past 1,000 (hours on a workstation, a report table nobody reads), a grid is far
# likelier a slip (four 100-value lists are 10^8 points) than a plan: refused unless --max-points says so.
MAX_POINTS = 1000


def grid_size(axes: dict[str, list]) -> tuple[int, str]:
    """The number of points of ``axes`` (counted, not built) and how it comes about (``policy 2 x page_size
    4 = 8 points``)."""
    num_points = math.prod(len(values) for values in axes.values())
    factors = " x ".join(f"{name} {len(axes[name])}" for name in AXIS_NAMES if len(axes.get(name, ())) > 1)
    return num_points, f"{factors} = {num_points:,} points" if factors else f"{num_points:,} point"


def check_grid_size(axes: dict[str, list], max_points: int = MAX_POINTS) -> int:
    """The grid's size; ValueError naming --max-points when it is larger than ``max_points``."""
    num_points, text = grid_size(axes)
    if num_points > max_points:
        raise ValueError(
            f"--max-points: the grid has {text}, over the limit of {max_points:,}; shorten the lists, "
            f"or raise --max-points to {num_points} if this is meant"
        )
    return num_points


def expand(
    axes: dict[str, list],
    calibration: str | None = None,
    mode: str = "timed",
    max_points: int = MAX_POINTS,
    slo: str | None = None,
) -> list:
    """The cartesian product of ``axes`` in AXES order (last axis fastest), one SimConfig per point; a grid
    of more than ``max_points`` is refused before any is built; ``slo`` (one for the whole grid) is every
    point's."""
    unknown = set(axes) - set(AXIS_NAMES)
    if unknown:
        raise ValueError(f"unknown grid axes {sorted(unknown)}; known: {', '.join(AXIS_NAMES)}")
    check_grid_size(axes, max_points)
    names = [name for name in AXIS_NAMES if name in axes]
    configs = []
    for values in itertools.product(*(axes[name] for name in names)):
        chosen = dict(zip(names, values, strict=True))
        knobs = {k: v for k, v in chosen.items() if _BY_NAME[k].kind == KNOB}
        # SimConfig fields of several types, each parsed by its axis (NONE only where the field takes None)
        fields: dict[str, Any] = {
            k: None if v == NONE else v for k, v in chosen.items() if _BY_NAME[k].kind == CONFIG
        }
        configs.append(SimConfig(knobs=knobs, calibration=calibration, mode=mode, slo=slo, **fields))
    return configs
