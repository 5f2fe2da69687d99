"""The default loop's parks through a stall taken at once: where nothing can be scheduled, the loop parks the
newest running request and schedules again; while every running request is in its prompt with its stall already
told (``CappedStalls.told``: SGLang's admission cap leaves its first chunk no budget) and none waits, that schedule
decodes none, asks no chunk and admits none: it only begins a pass, and forms no batch, so the loop parks the next,
and with none left running unparks them all. ``DefaultScheduler.park_newest`` takes those parks and the unpark in
one call: the same retractions in the same order (each given-up request left in ``given_up`` for the loop, which
rejects them in their order at the same instant), the skipped passes begun afresh by the next schedule (a pass's
accounts are computed from the pools and requests alone, and nothing between reads them).
"""

from __future__ import annotations

from collections import deque

from sim.sched.capped_stalls import CappedStalls
from sim.sched.request import RequestState

# False: after each park the loop schedules again, forming no batch, before it parks the next or unparks (the
# reference; tests/test_stalled_parks.py holds both equal)
PARKS_AT_ONCE = True


def forms_nothing(
    capped: CappedStalls,
    running: dict[str, RequestState],
    waiting: deque[RequestState],
    parked: list[RequestState],
) -> bool:
    """Whether the default loop's ``schedule`` would now form no batch and record nothing but a pass begun: work is
    left (the loop schedules without waiting), none waits, and every running request is in its prompt, told."""
    manager = capped.manager
    if waiting or not (running or parked) or manager is None:
        return False
    requests, told = manager.requests, capped.told
    for run in running.values():
        if run.request_id not in told or requests[run.request_id].kv_len >= run.prompt_len:
            return False
    return True
