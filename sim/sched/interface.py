"""What the engine loop drives of a scheduler (every engine's strategy satisfies it): requests in, one batch
per step out, what the step's end changed, and the bookkeeping of requests the pools cannot serve."""

from __future__ import annotations

from collections import deque
from typing import Protocol

from sim.cache.interface import CacheModel
from sim.sched.batch import Batch, FullStep, StepOutcome
from sim.sched.request import RequestState


class Scheduler(Protocol):
    @property
    def manager(self) -> CacheModel:
        """The cache the scheduler drives (read only: a scheduler may hold a narrower manager type)."""
        ...

    waiting: deque[RequestState]
    parked: list[RequestState]  # retracted because nothing could be scheduled; held back until unpark()
    given_up: list[tuple[RequestState, str]]  # requests the pools can never serve, with the reason

    def add(self, state: RequestState) -> None: ...
    def has_work(self) -> bool: ...
    def schedule(self, iteration: int) -> Batch: ...
    def postprocess(self, batch: Batch) -> StepOutcome: ...
    def park_newest(self) -> bool: ...
    def unpark(self) -> None: ...
    def plain_decode_run(self, iteration: int) -> tuple[list[RequestState], int]:
        """The running requests and how many coming steps are plain decodes for all of them (the fast path)."""
        ...

    def advance_plain(self, runs: list[RequestState], num_steps: int) -> tuple[int, list[FullStep]] | None:
        """Take the steps, before the clock moves over them: None where all were plain, else how many were
        taken (maybe fewer) and those the loop would have taken in full (the SGLang loop's batch runs)."""
        ...
