"""The axes of a sweep: every simulate knob and pool option as a list, and their cartesian product.

A grid is given as comma lists (``--page-size 64,128``); each axis parses its list here so that bad
input is rejected before anything runs, with the option and the offending item named.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from sim.cache.policies import policy_names
from sim.cost import GPUS
from sim.models import MODELS

KNOB = "knob"  # a policy knob: goes into SimConfig.knobs
CONFIG = "config"  # a SimConfig field (policy, model, gpu, pool options)


@dataclass(frozen=True)
class Axis:
    name: str  # SimConfig field or policy knob name
    kind: str  # KNOB or CONFIG
    parse: Callable[[str], object]  # one item of the comma list -> value; ValueError says what is wrong

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise ValueError(f"must be an integer >= {low}, got {value}")
        return value
    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a finite number > 0, got {text!r}")
    return value


def _choice(what: str, choices: Callable[[], list[str]]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices():
            raise ValueError(f"unknown {what} {text!r}; choose from {', '.join(choices())}")
        return text
    return parse


# Outermost first: the policy is innermost so that a grid's rows put each setting's policies side by side.
AXES: tuple[Axis, ...] = (
    Axis("model", CONFIG, _choice("model", lambda: sorted(MODELS))),
    Axis("gpu", CONFIG, _choice("GPU", lambda: sorted(GPUS))),
    Axis("page_size", KNOB, _int_at_least(1)),
    Axis("track_interval", KNOB, _int_at_least(1)),
    Axis("window", KNOB, _int_at_least(0)),
    Axis("mamba_chunk", KNOB, _int_at_least(1)),
    Axis("chunked_prefill_size", KNOB, _int_at_least(1)),
    Axis("max_running_requests", KNOB, _int_at_least(1)),
    Axis("swa_free_trigger", KNOB, _choice("trigger", lambda: ["tokens", "iterations"])),
    Axis("swa_eviction_interval", KNOB, _int_at_least(1)),
    Axis("iteration_phase", KNOB, _int_at_least(0)),
    Axis("finish_trim_gap", KNOB, _int_at_least(0)),
    Axis("swa_pool_floor", KNOB, _choice("pool floor", lambda: ["window", "window+interval"])),
    Axis("pool_tokens", CONFIG, _int_at_least(1)),
    Axis("swa_pool_tokens", CONFIG, _int_at_least(0)),
    Axis("mamba_states", CONFIG, _int_at_least(0)),
    Axis("kv_memory_gb", CONFIG, _positive_float),
    Axis("swa_full_tokens_ratio", CONFIG, _positive_float),
    Axis("mamba_full_memory_ratio", CONFIG, _positive_float),
    Axis("policy", CONFIG, _choice("policy", policy_names)),
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


def expand(axes: dict[str, list], calibration: str | None = None, mode: str = "timed") -> list:
    """The cartesian product of ``axes`` in AXES order (last axis fastest), one SimConfig per point."""
    from sim.simulate import SimConfig  # here, not at the top: the CLI reads AXES without pandas or simpy

    unknown = set(axes) - set(AXIS_NAMES)
    if unknown:
        raise ValueError(f"unknown grid axes {sorted(unknown)}; known: {', '.join(AXIS_NAMES)}")
    names = [name for name in AXIS_NAMES if name in axes]
    configs = []
    for values in itertools.product(*(axes[name] for name in names)):
        chosen = dict(zip(names, values, strict=True))
        knobs = {k: v for k, v in chosen.items() if _BY_NAME[k].kind == KNOB}
        fields = {k: v for k, v in chosen.items() if _BY_NAME[k].kind == CONFIG}
        configs.append(SimConfig(knobs=knobs, calibration=calibration, mode=mode, **fields))
    return configs
