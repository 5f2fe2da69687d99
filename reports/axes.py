"""The axis a report compares along: the policy, or any knob or option the grid varies, with one of its values
as the baseline (``report --baseline AXIS=VALUE``; a plain name is a policy). Every other value of that axis is
compared with the baseline point of the same setting: the same values of every other axis."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reports.grid_data import GridData
from sim.engines.registry import KNOBS

POLICY = "policy"


@dataclass(frozen=True)
class Baseline:
    axis: str  # "policy" or a varying setting's name
    value: object

    @property
    def label(self) -> str:
        return f"{self.axis}={shown(self.value)}"


def shown(value: object) -> str:
    return "none" if value is None else str(value)


def axes(data: GridData) -> list[str]:
    """Every axis the grid varies: the policy (when it has more than one), then its varying settings."""
    return ([POLICY] if len(data.policies()) > 1 else []) + list(data.settings)


def value_of(data: GridData, point: pd.Series, axis: str) -> object:
    return point["policy"] if axis == POLICY else point["setting"][data.settings.index(axis)]


def values(data: GridData, axis: str) -> list:
    """The axis's values in grid order."""
    return list(dict.fromkeys(value_of(data, row, axis) for _, row in data.points.iterrows()))


def others(data: GridData, axis: str | None) -> list[str]:
    """The axes a comparison along ``axis`` holds fixed."""
    return [name for name in axes(data) if name != axis]


def rest_of(data: GridData, point: pd.Series, axis: str | None) -> tuple:
    """The point's values of every axis but ``axis``: equal for the points one comparison puts side by side."""
    return tuple(value_of(data, point, name) for name in others(data, axis))


def choose_baseline(data: GridData, text: str | None) -> Baseline | None:
    """The baseline ``text`` names (``AXIS=VALUE``, or a policy's name), or by default the first value of the
    varying axis ``_default_rank`` puts first (the policy when several ran, else a knob); None when nothing
    varies."""
    names = axes(data)
    if text is None:
        preferred = sorted(names, key=_default_rank)
        return Baseline(preferred[0], values(data, preferred[0])[0]) if names else None
    axis, sep, wanted = text.partition("=")
    if not sep:
        axis, wanted = POLICY, text
        if text not in data.policies():
            raise ValueError(
                f"--baseline {text!r} is not a policy of this grid; it has {', '.join(data.policies())} "
                f"(or give AXIS=VALUE of an axis it varies: {', '.join(names) or 'none'})"
            )
    axis = axis.strip().replace("-", "_")
    if axis not in names:
        raise ValueError(
            f"--baseline {text!r}: {axis!r} does not vary in this grid; it varies {', '.join(names) or 'nothing'}"
        )
    found = [v for v in values(data, axis) if _same(v, wanted.strip())]
    if not found:
        taken = ", ".join(shown(v) for v in values(data, axis))
        raise ValueError(f"--baseline {text!r}: {axis} takes {taken} in this grid")
    return Baseline(axis, found[0])


def _default_rank(axis: str) -> int:
    """Which axis a report compares along when none is named: the policy, then a knob, then a pool option
    or the model, and the load (``request_rate_scale``, the capacity section's axis) last."""
    if axis == POLICY:
        return 0
    if axis in KNOBS:
        return 1
    return 3 if axis == "request_rate_scale" else 2


def _same(value: object, text: str) -> bool:
    if shown(value) == text:
        return True
    try:
        return float(shown(value)) == float(text)
    except ValueError:
        return False
