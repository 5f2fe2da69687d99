"""FreeToken's own knobs (the finish-time trim's gap, the overlap scheduler), apart from its rules: knobs are
read once per run, and the compiled core (``sim/compiled_core.py``) leaves them interpreted (mypyc cannot
compile a dataclass whose base is an interpreted class)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.engines.base import overlap_knob
from sim.cache.knobs import MAX_INT, knob
from sim.cache.policy import EngineKnobs


@dataclass(frozen=True)
class FreeTokenKnobs(EngineKnobs):
    finish_trim_gap: int | None = knob(
        None,
        "finish-time head trim: SWA kept for [prompt - W - gap, prompt)",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
        none_means="no trim (#488)",
    )
    overlap: bool = overlap_knob()
