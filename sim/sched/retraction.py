"""A running request freed by the default loop, as SGLang retracts one, then requeued at the head; a request
retracted while running alone is given up on where the engine does so (SGLang aborts it), or when it got no
further than the last time it ran alone (a livelock: only it could have helped itself)."""

from __future__ import annotations

from sim.cache.events import Retracted
from sim.cache.interface import CacheModel
from sim.sched.request import RequestState


def retract(
    manager: CacheModel, running: dict[str, RequestState], victim: RequestState, why: str
) -> str | None:
    """Free ``victim``'s cache and take it out of ``running``: why it is given up on, or None to requeue it."""
    request_id = victim.request_id
    reached = manager.requests[request_id].kv_len
    alone = len(running) == 1
    manager.abort(request_id)
    manager.events.publish(Retracted(request_id, reached, why))
    del running[request_id]
    victim.num_retractions += 1
    if alone and not manager.requeues_lone_request:
        return f"given up while running alone at position {reached}: {why}"
    if alone and reached <= victim.alone_reached:
        return (
            f"retracted twice while running alone, the second time no further than position {reached}: {why}"
        )
    if alone:
        victim.alone_reached = reached
    return None
