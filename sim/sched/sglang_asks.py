"""An SGLang batch run's quiet-stretch asks known empty before they are asked (switch ``EMPTY_KNOWN``).

A run asks for a quiet stretch (``batch.take_quiet_stretch``) before every event step, and again after every
stretch it took; of ``sglang``'s 21,689 asks at 4,000 requests 11,188 came back empty (docs/results/presets-speed.md,
Round 37), each having asked every request's ``plain_decode_steps``. The stretch is empty where any one request's
commit is pending or its step is an event (``batch_decode_stretch`` then answers 0, and takes nothing). The run
already holds a request likely to say so: the one whose rules ended the stretch it just took (its step right after
the stretch is an event), or the first the event step it just took found eventful (under the retain floor a fired
trigger fires at every step). That request alone is asked first; only where it is quiet is the whole batch asked.
Off: every ask made (the reference; ``tests/test_sglang_empty_asks_property.py`` holds both equal).
"""

from __future__ import annotations

from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.sched import batch
from sim.sched.batch import FullStep, take_asked_stretch, take_quiet_stretch
from sim.sched.sglang_event_plans import StepNeeds

EMPTY_KNOWN = True


def ask_quiet_stretch(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    max_steps: int,
    announced: bool,
    limiter: RequestCache | None,
) -> tuple[int, list[FullStep], RequestCache | None]:
    """``take_quiet_stretch``, answered empty without asking where ``limiter`` (a request of ``reqs``, or None)
    says so (``known_empty``); also returns the request to ask first next time (the stretch's limiter)."""
    if not (EMPTY_KNOWN and batch.PAGE_STARTS_ONCE):
        return (*take_quiet_stretch(manager, reqs, iteration, done, max_steps, announced), None)
    if limiter is not None and known_empty(manager, limiter, iteration + done):
        return 0, [], limiter
    stretch, starts, limiter = manager.limited_decode_stretch(reqs, iteration + done, max_steps - done)
    taken = take_asked_stretch(manager, reqs, iteration, done, stretch, starts, announced)
    return taken[0], taken[1], limiter


def known_empty(manager: CacheManager, req: RequestCache, iteration: int) -> bool:
    """Whether the quiet stretch from ``iteration`` is certainly empty, read from one request of the batch: its
    commit is pending or its step there is an event."""
    if req.commit_pending:
        return True
    return manager.rules.plain_decode_steps(req, iteration + manager.policy.iteration_phase) <= 0


def first_eventful(
    reqs: list[RequestCache], needs: StepNeeds | None, limiter: RequestCache | None
) -> RequestCache | None:
    """The request to ask first after an event step: the first its one pass found an event (``needs``), else
    ``limiter`` as it was."""
    if needs is None or True not in needs.events:
        return limiter
    return reqs[needs.events.index(True)]
