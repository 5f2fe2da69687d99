"""The steps a loop's fast path may take in one event: how many coming steps are plain decodes for every
running request, none of them finishing (the engine's ``_plain_run``)."""

from __future__ import annotations

from collections.abc import Iterable

from sim.cache.interface import CacheModel
from sim.sched.request import RequestState


def plain_steps(manager: CacheModel, runs: Iterable[RequestState], iteration: int) -> int:
    """The fewest plain decode steps any of ``runs`` allows from ``iteration`` on (each stopping a step short
    of its last output), 0 as soon as one allows none: at page 1 every step allocates, and the first
    request asked says so."""
    fewest = 1 << 62
    for run in runs:
        steps = run.output_len - run.decoded - 2
        if steps > 0:
            steps = min(steps, manager.plain_decode_steps(manager.requests[run.request_id], iteration))
        if steps <= 0:
            return 0
        fewest = min(fewest, steps)
    return fewest if fewest < 1 << 62 else 0
