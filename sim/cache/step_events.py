"""The engine's step events (re-exported by ``events.py``, where every publisher and observer imports them): here
apart so that ``events.py`` stays a readable size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A batch about to run (timed mode), with the manager its plans came from. ``num_steps`` > 1: that many
    decode-only steps of a batch run (``sim/sched/sglang_runs.py``), each item one token further at each step
    than at the step before (the batch is the first step's; only the fast path sends these)."""

    batch: Any
    manager: Any
    num_steps: int = 1


@dataclass(frozen=True, slots=True)
class StepEnded:
    """A step ran: its row of the step table (``sim/run/step_log.py``) and the pools after it."""

    step: tuple  # iteration, started at, duration, prefills, prefill tokens, decodes
    pools: tuple  # the pool columns, after the step


@dataclass(frozen=True, slots=True)
class PlainStepsEnded:
    """Steps of the fast path: decodes only, nothing allocated; the pools read as after the step before."""

    first_step: int
    starts: list[float]
    durations: list[float]
    num_decode: int
