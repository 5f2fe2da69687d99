"""A run's summary (docs/figures.md) as one typed record: reuse, time, capacity (rates, ITL, the SLO), pools,
the gap to the ideal, why tokens were recomputed, and the offline bounds.

Each section is computed by its own module and handed over as keyword arguments, so a missing or unknown
figure is an error at the run's end, not a KeyError in a report. ``as_dict()`` is the flat JSON object
(``summary.json``, a grid point, ``--format json``); figures a run does not have (vLLM's ``capacity_blocks``,
the bounds of a run that skipped them) are left out of it. The ``Mapping`` methods read the same flat
names, so a summary and one loaded back from JSON are read alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sim.bounds.summary import BoundFigures
from sim.bounds.upper_bound import GapFigures
from sim.run.metrics import PoolFigures, ReuseFigures, TimeFigures
from sim.run.slo import CapacityFigures
from sim.run.why import WhyFigures


@dataclass(frozen=True, kw_only=True)
class Summary(
    BoundFigures,
    WhyFigures,
    GapFigures,
    PoolFigures,
    CapacityFigures,
    TimeFigures,
    ReuseFigures,
    # read by name (reports, a summary loaded from JSON alike) a figure is what its field holds: the typed
    # fields are the checked way in, the names are for tables generated from docs/figures.md
    Mapping[str, Any],
):
    """Every figure of a run, flat (the JSON object's fields, in the sections' order: reuse, time, capacity,
    pools, gap, why, bounds). Made from the typed sections by ``of``."""

    @classmethod
    def of(cls, *sections: object) -> Summary:
        """The summary of a run's sections (each a dataclass whose fields are some of the summary's)."""
        figures: dict[str, Any] = {}
        for section in sections:
            figures.update((f.name, getattr(section, f.name)) for f in dataclasses.fields(section))  # type: ignore[arg-type]
        return cls(**figures)

    def as_dict(self) -> dict[str, object]:
        """The flat JSON object, in field order, without the figures this run does not have."""
        return {f.name: getattr(self, f.name) for f in _FIELDS if getattr(self, f.name) is not None}

    def __getitem__(self, name: str) -> Any:
        value = getattr(self, name, None) if name in _NAMES else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


_FIELDS = dataclasses.fields(Summary)
_NAMES = frozenset(f.name for f in _FIELDS)
