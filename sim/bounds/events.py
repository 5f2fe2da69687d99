"""What a run did, as the bounds see it: each request's lookup, and the pages each request computed.

A ``Lookup`` is a request's admission: its match may cover the first ``key_pages`` pages of its prompt (the
key ``page_floor(prompt_len - 1)``: the last prompt token is always recomputed); ``counted`` marks the
lookup whose match the request's row reports (its last admission). A ``Produce`` is a request computing
pages ``[first_page, end_page)`` of its prompt + output: from then on a cache could keep them (a page counts
as produced when it is first allocated, and only if the request will fill it).

Replay mode: each request's lookup, then every page it computes. Timed mode: recorded step by step by
``EventRecorder``, a backend wrapper: the lookups of the requests a step admits come before the pages the
step's chunks allocate; a request's pages produced between two lookups (of any request) are logged as one
run (``ProduceRuns``): at page 1 a decode step produces a page per request, and the bounds give the same
figures either way (below, and ``tests/test_produce_runs.py`` against the per-page log).

Why a run gives what its pages one by one give: between two lookups nothing is hit, so every page produced
there has the same next counted lookup (Belady's key) and the same count of lookups before it (the state
bound's interval start) wherever in that stretch it is produced. Belady's produce keeps, of the cached and
the produced pages, the ones needed soonest (a page only below its parent, whose next use is never later);
once the cache is full the furthest next use it holds only falls, so a page refused (or evicted) in the
stretch would be refused again later in it: the order of the stretch's pages changes which pages of equal
next use are kept only among those needed never again (no hit reads them). The state bound keeps, per
lookup, a node's deepest page with its last touch's lookup count: the same count anywhere in the stretch.
"""

from __future__ import annotations

from typing import NamedTuple

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


class ProduceRuns:
    """An event log that merges each request's produced pages between two lookups into one ``Produce``: a
    request's pages that extend its open run (start at or before its end, not before its start) join it; a
    lookup (of any request) closes every open run, logged in the order they were opened, before itself.
    ``merge=False`` logs every event as given (the per-page log, the reference)."""

    def __init__(self, merge: bool = True):
        self.merge = merge
        self._events: list = []
        self._open: dict[str, list[int]] = {}  # request id -> [first page, end page] of its open run

    def lookup(self, event: Lookup) -> None:
        self.close()
        self._events.append(event)

    def produce(self, request_id: str, first_page: int, end_page: int) -> None:
        if not self.merge:
            self._events.append(Produce(request_id, first_page, end_page))
            return
        run = self._open.get(request_id)
        if run is not None and run[0] <= first_page <= run[1]:
            if end_page > run[1]:
                run[1] = end_page
            return
        if run is not None:  # not contiguous (no recorder makes this): the open run ends here
            self._events.append(Produce(request_id, run[0], run[1]))
        self._open[request_id] = [first_page, end_page]

    def close(self) -> None:
        if self._open:
            self._events += [Produce(rid, first, end) for rid, (first, end) in self._open.items()]
            self._open = {}

    def events(self) -> list:
        self.close()
        return self._events


def merge_runs(events: list) -> list:
    """``events`` with each request's pages between two lookups merged into runs (what the recorder logs)."""
    runs = ProduceRuns()
    for event in events:
        if isinstance(event, Lookup):
            runs.lookup(event)
        else:
            runs.produce(*event)
    return runs.events()


class EventRecorder:
    """Subscribed to a timed run's ``StepStarted`` events: records the lookups and page allocations of every
    step that runs (runs of plain decode steps allocate nothing), a request's pages between two lookups as
    one run (``ProduceRuns``; ``merge_runs=False``: as allocated, the reference)."""

    def __init__(self, events: EventBus, trace: Trace, page_size: int, merge_runs: bool = True):
        self._trace, self._page = trace, page_size
        self._seen: dict[str, object] = {}  # request id -> the RequestCache of its current admission
        self._last_page: dict[str, int] = {}  # request id -> computed_pages, read once (a step per token)
        self._log = ProduceRuns(merge_runs)
        events.subscribe(StepStarted, lambda event: self.record(event.batch, event.manager))

    def record(self, batch, manager) -> None:
        items = batch.items
        self._record_lookups(items, manager.requests)
        page, last_page, produce = self._page, self._last_page, self._log.produce
        for item in items:  # a step per token at page 1 (every decoding request's page): kept lean
            plan = item.plan
            request_id = plan.request_id
            last = last_page.get(request_id)
            if last is None:
                last = last_page[request_id] = computed_pages(self._trace, request_id, page)
            first, end = plan.start // page, -(-plan.end // page)
            if first < end and first < last:
                produce(request_id, first, end if end < last else last)

    def _record_lookups(self, items, requests) -> None:
        seen = self._seen
        for item in items:
            request_id = item.plan.request_id
            req = requests[request_id]
            if seen.get(request_id) is not req:
                seen[request_id] = req
                self._log.lookup(Lookup(request_id, key_pages(req.prompt_len, self._page), False))

    def events(self, served: set[str]) -> list:
        """The log, each served request's last lookup marked as the counted one."""
        events = self._log.events()
        last = {event.request_id: i for i, event in enumerate(events) if isinstance(event, Lookup)}
        counted = {i for request_id, i in last.items() if request_id in served}
        return [event._replace(counted=True) if i in counted else event for i, event in enumerate(events)]
