"""One engine step's batch: which requests run which tokens (a prefill chunk or one decode token each), and
what the step's end changed (first tokens, finished requests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from sim.cache.components import Component
from sim.cache.pools import PoolUsage
from sim.cache.results import ChunkPlan
from sim.sched.request import RequestState


@dataclass(frozen=True)
class BatchItem:
    plan: ChunkPlan
    is_prefill: bool
    copy_state_from: int | None = None  # set on a request's first chunk: resume from this tree state


@dataclass
class Batch:
    iteration: int
    items: list[BatchItem] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.items)


@dataclass(frozen=True)
class StepOutcome:
    first_tokens: list[RequestState]  # requests whose prompt finished this step
    finished: list[RequestState]


class FullStep(NamedTuple):
    """A step of a decode run that the loop would have taken in full (``sim/sched/sglang_runs.py``): its offset in
    the run, the pages it started, its batch (None where nothing reads it: a step that only started pages, with
    no bounds recorded), and for an event step the pools after it (None: only pages moved from free to
    running). ``num_steps`` > 1: that many steps from ``offset`` on, each starting ``pages`` pages, no batch."""

    offset: int
    pages: int
    batch: Batch | None
    usage: dict[Component, PoolUsage] | None
    num_steps: int = 1
