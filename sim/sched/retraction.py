"""A running request freed and requeued at the head by the default loop, as SGLang retracts one; a request
retracted while running alone is given up on where the engine does so (SGLang aborts it), or when it got no
further than the last time it ran alone (a livelock: only it could have helped itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.cache.events import Retracted
from sim.sched.request import RequestState

if TYPE_CHECKING:
    from sim.sched.default import DefaultScheduler


def retract(scheduler: DefaultScheduler, victim: RequestState, why: str) -> None:
    request_id = victim.request_id
    manager = scheduler.manager
    reached = manager.requests[request_id].kv_len
    alone = len(scheduler.running) == 1
    manager.abort(request_id)
    scheduler._capped.forget(request_id)
    manager.events.publish(Retracted(request_id, reached, why))
    del scheduler.running[request_id]
    victim.num_retractions += 1
    if alone and not manager.requeues_lone_request:
        scheduler.given_up.append((victim, f"given up while running alone at position {reached}: {why}"))
        return
    if alone and reached <= victim.alone_reached:
        again = f"the second time no further than position {reached}: {why}"
        scheduler.given_up.append((victim, f"retracted twice while running alone, {again}"))
        return
    if alone:
        victim.alone_reached = reached
    scheduler.waiting.appendleft(victim)
