"""A run step by step, recorded the same way for an engine and for ``simulate``, and the first place two differ.

Both sides count time in steps (a step clock): every launched batch takes one unit, an idle engine jumps to
the next arrival, and request i is submitted before the batch launched at its arrival step. A step records
the batch (each request's id, its tokens and whether they are prefill, in the engine's order), the pools
after the step (free and tree-held units per component: pages, or states for MAMBA) and the requests
retracted or preempted in it; a request records its cached tokens, whether it was served and the step clock
at which it finished. ``first_difference`` names the earliest step where anything differs, else the first
request.
"""

from __future__ import annotations

from typing import NamedTuple

COMPONENTS = ("FULL", "SWA", "MAMBA")


class EngineCorrupt(RuntimeError):
    """The engine's own bookkeeping broke (e.g. a page freed twice): what it does next cannot be compared,
    what it did before can. ``steps``: the engine's steps before ``at``, the step clock it broke at."""

    def __init__(self, message: str, steps: tuple = (), at: int | None = None):
        super().__init__(message)
        self.steps, self.at = steps, at


class Step(NamedTuple):
    at: int  # the step clock when the batch launched
    batch: tuple[tuple[str, int, bool], ...]  # (request id, tokens, prefill) in the engine's order
    pools: tuple[tuple[int, int], ...]  # (free, tree-held) per component the model has, after the step
    retracted: tuple[str, ...] = ()  # retracted or preempted in this step, in the engine's order


class Served(NamedTuple):
    cached_tokens: int
    served: bool
    finished_at: int | None  # the step clock after its last step (None: never served)
    note: str = ""


class Trajectory(NamedTuple):
    steps: tuple[Step, ...]
    requests: dict[str, Served]


class Difference(NamedTuple):
    at: int | None  # the step clock of the first differing step (None: only a request differs)
    what: str  # "batch", "pools", "retracted", "steps", or the request's field
    engine: object
    simulated: object
    request_id: str = ""

    def describe(self) -> str:
        where = f"step {self.at}" if self.at is not None else f"request {self.request_id}"
        return f"{where}: {self.what} differs: engine {self.engine!r}, simulate {self.simulated!r}"


def first_difference(engine: Trajectory, simulated: Trajectory) -> Difference | None:
    """The earliest differing step (its batch, pools or retractions), else the first request in the
    engine's order whose outcome differs, else None."""
    for theirs, mine in zip(engine.steps, simulated.steps, strict=False):
        if theirs.at != mine.at:
            return Difference(min(theirs.at, mine.at), "step clock", theirs.at, mine.at)
        for what in ("batch", "pools", "retracted"):
            if getattr(theirs, what) != getattr(mine, what):
                return Difference(theirs.at, what, getattr(theirs, what), getattr(mine, what))
    if len(engine.steps) != len(simulated.steps):
        longer = engine.steps if len(engine.steps) > len(simulated.steps) else simulated.steps
        at = longer[min(len(engine.steps), len(simulated.steps))].at
        return Difference(at, "steps", len(engine.steps), len(simulated.steps))
    return _first_request_difference(engine, simulated)


COMPARED = ("served", "cached_tokens", "finished_at")  # a request's note says why in each side's words


def same_outcome(theirs: Served, mine: Served) -> bool:
    """The compared fields agree (the notes, each side's wording of a refusal, are not compared)."""
    return all(getattr(theirs, what) == getattr(mine, what) for what in COMPARED)


def _first_request_difference(engine: Trajectory, simulated: Trajectory) -> Difference | None:
    for request_id, theirs in engine.requests.items():
        mine = simulated.requests[request_id]
        for what in COMPARED:
            if getattr(theirs, what) != getattr(mine, what):
                return Difference(None, what, getattr(theirs, what), getattr(mine, what), request_id)
    return None


def pools_of(usage: dict[str, tuple[int, int]], components: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """The pools column of a step: (free, tree-held) for each of ``components``, in FULL, SWA, MAMBA order."""
    return tuple(usage[name] for name in COMPONENTS if name in components)
