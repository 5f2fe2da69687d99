"""docs/figures.md names every figure of the summary, in its section, and no figure the summary lacks."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sim.bounds.summary import BoundFigures
from sim.bounds.upper_bound import GapFigures
from sim.run.metrics import PoolFigures, ReuseFigures, TimeFigures
from sim.run.slo import CapacityFigures
from sim.run.summary import Summary
from sim.run.why import WhyFigures

DOC = Path(__file__).resolve().parents[1] / "docs" / "figures.md"
SECTIONS = {
    "reuse": ReuseFigures,
    "time": TimeFigures,
    "capacity": CapacityFigures,
    "pools": PoolFigures,
    "gap": GapFigures,
    "why": WhyFigures,
    "bounds": BoundFigures,
}


def documented() -> dict[str, str]:
    """figure -> the section its table row names."""
    found = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1] in SECTIONS:
            for name in re.findall(r"`([a-z0-9_]+)`", cells[0]):
                found[name] = cells[1]
    return found


def test_every_summary_figure_is_documented_in_its_section():
    expected = {f.name: section for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
    assert documented() == expected
    assert set(expected) == {f.name for f in dataclasses.fields(Summary)}
