"""What a run did, as the bounds see it: each request's lookup, and the pages each request computed.

A ``Lookup`` is a request's admission: its match may cover the first ``key_pages`` pages of its prompt (the
key ``page_floor(prompt_len - 1)``: the last prompt token is always recomputed); ``counted`` marks the
lookup whose match the request's row reports (its last admission). A ``Produce`` is a request computing
pages ``[first_page, end_page)`` of its prompt + output: from then on a cache could keep them (a page counts
as produced when it is first allocated, and only if the request will fill it).

Replay mode: each request's lookup, then every page it computes. Timed mode: recorded step by step by
``EventRecorder``, a backend wrapper: the lookups of the requests a step admits come before the pages the
step's chunks allocate.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.align import ceil_div
from sim.cache.events import EventBus, StepStarted
from sim.trace import Trace


class Lookup(NamedTuple):
    request_id: str
    key_pages: int
    counted: bool


class Produce(NamedTuple):
    request_id: str
    first_page: int
    end_page: int


def key_pages(prompt_len: int, page_size: int) -> int:
    return max(prompt_len - 1, 0) // page_size


def computed_pages(trace: Trace, request_id: str, page_size: int) -> int:
    """Whole pages of what the request computes: its prompt and all its output but the last token."""
    return (trace.prompt_len(request_id) + trace.request(request_id).output_len - 1) // page_size


def replay_events(
    trace: Trace, order: list[str], served: set[str], admitted: set[str], page_size: int
) -> list:
    """Replay mode: requests one after another in ``order``; an admitted request that was not served (the
    pools refused it part-way) still counts as having computed its pages (a superset of what it did)."""
    events: list = []
    for request_id in order:
        if request_id not in admitted:
            continue
        events.append(
            Lookup(request_id, key_pages(trace.prompt_len(request_id), page_size), request_id in served)
        )
        events.append(Produce(request_id, 0, computed_pages(trace, request_id, page_size)))
    return events


class EventRecorder:
    """Subscribed to a timed run's ``StepStarted`` events: records the lookups and page allocations of every
    step that runs (runs of plain decode steps allocate nothing)."""

    def __init__(self, events: EventBus, trace: Trace, page_size: int):
        self._trace, self._page = trace, page_size
        self._seen: dict[str, object] = {}  # request id -> the RequestCache of its current admission
        self._last_page: dict[str, int] = {}  # request id -> computed_pages, read once (a step per token)
        self._events: list = []
        events.subscribe(StepStarted, lambda event: self.record(event.batch, event.manager))

    def record(self, batch, manager) -> None:
        page = self._page
        for item in batch.items:
            request_id = item.plan.request_id
            req = manager.requests[request_id]
            if self._seen.get(request_id) is not req:
                self._seen[request_id] = req
                self._events.append(Lookup(request_id, key_pages(req.prompt_len, page), False))
        last_page = self._last_page
        for item in batch.items:
            plan = item.plan
            request_id = plan.request_id
            last = last_page.get(request_id)
            if last is None:
                last = last_page[request_id] = computed_pages(self._trace, request_id, page)
            first, end = plan.start // page, min(ceil_div(plan.end, page), last)
            if first < end:
                self._events.append(Produce(request_id, first, end))

    def events(self, served: set[str]) -> list:
        """The log, each served request's last lookup marked as the counted one."""
        last = {event.request_id: i for i, event in enumerate(self._events) if isinstance(event, Lookup)}
        counted = {i for request_id, i in last.items() if request_id in served}
        return [
            event._replace(counted=True) if i in counted else event for i, event in enumerate(self._events)
        ]
