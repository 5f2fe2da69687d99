"""The timed run's events for the bounds (``events.py``), recorded step by step; a request's output pages
between two lookups logged as one run.

At page 1 a decode step produces a page per running request: the per-page log of a 1,000-request timed run
has 350,000 events, and its trie a node per event boundary. ``ProduceRuns`` folds a request's produced
pages into its open run (the event that opened it keeps its place) when the run and the pages all hold
some of the request's own output and no lookup came between; the bounds read the same figures as from the
per-page log (``merge=False``, the reference; ``tests/test_produce_runs.py``). Why:

- between two lookups nothing is hit, so a page produced there has the same next counted lookup (Belady's
  key) and the same count of lookups before it (the state bound's interval start) anywhere in the stretch;
- a page holding output of request ``r`` is on no other request's path but those quoting ``r``'s output;
  once one of those is looked up (it may compute those pages while ``r`` still decodes: an open-loop
  follow-up) ``r``'s pages are never folded again, so a folded page's parent is its own run's previous
  page, or, for the run's first page, checked where the run's first event was; and no other event of the
  stretch covers it;
- so a folded page is offered to Belady earlier, right after its parent: once the cache is full the
  furthest next use it holds only falls, so a page refused or evicted later in the stretch would be evicted
  again, and the pages of one next use (one lookup's chain) that end up kept are the same.
"""

from __future__ import annotations

from sim.bounds.events import Lookup, Produce, computed_pages, key_pages
from sim.bounds.stretch_record import record_stretch
from sim.cache.events import EventBus
from sim.sched.batch import DecodeBatch
from sim.sched.run_steps import RunSteps
from sim.sched.stretch_steps import StretchSteps
from sim.trace import Trace

NEVER = 2**62  # past any page
# True: a batch run's page steps taken at once (``num_steps`` > 1: FreeToken's runs at page 1) are read from their
# lengths, as a single page step is (``_record_decode_run``); False: through their items (the reference;
# tests/test_bounds_fast_paths_property.py holds both equal)
RUN_FROM_LENGTHS = True
# True: a lengths step's token on the page right after its request's open run extends the run in place (the calls it
# makes written out, ``_record_decode_step``); False: through ``_produce`` (the reference;
# tests/test_bounds_fast_paths_property.py holds both equal)
INLINE_RUN_EXTENSION = True


def quoted_outputs(trace: Trace, request_id: str) -> set[str]:
    """The requests whose output the request's prompt quotes."""
    return {s.output_of for s in trace.request(request_id).prompt if s.output_of is not None}


class ProduceRuns:
    """An event log that folds a request's produced pages into its open run: pages that extend it (start at
    or before its end, not before its start) where the run's and the pages' first pages hold some of the
    request's output (``(page + 1) * page_size > prompt_len``) and no request quoting that output has been
    looked up. A lookup (of any request) closes every run; ``merge=False`` logs every event as given (the
    per-page log, the reference)."""

    def __init__(self, trace: Trace, page_size: int, merge: bool = True):
        self.merge, self._trace, self._page = merge, trace, page_size
        self._events: list = []
        self._open: dict[str, list[int]] = {}  # request id -> [its run's index in the log, first, end page]
        self._first_output_page: dict[str, int] = {}  # the first page to fold from (never: NEVER)

    def lookup(self, event: Lookup) -> None:
        self.close()
        self._events.append(event)
        for quoted in quoted_outputs(self._trace, event.request_id):  # now two requests may compute them
            self._first_output_page[quoted] = NEVER

    def produce(self, request_id: str, first_page: int, end_page: int) -> None:
        run = self._open.get(request_id)
        if run is not None and run[1] <= first_page <= run[2]:
            if end_page > run[2]:
                run[2] = end_page
            return
        if run is not None:
            self._close_run(request_id, run)
        if self.merge and first_page >= self._output_page(request_id):
            self._open[request_id] = [len(self._events), first_page, end_page]
        self._events.append(Produce(request_id, first_page, end_page))

    def _output_page(self, request_id: str) -> int:
        first = self._first_output_page.get(request_id)
        if first is None:
            first = self._first_output_page[request_id] = self._trace.prompt_len(request_id) // self._page
        return first

    def _close_run(self, request_id: str, run: list[int]) -> None:
        del self._open[request_id]
        self._events[run[0]] = Produce(request_id, run[1], run[2])

    def open_requests(self) -> set[str]:
        """The requests whose run is open (a produced page that extends it is folded into it)."""
        return set(self._open)

    @property
    def open_runs(self) -> dict[str, list[int]]:
        """Request id -> its open run's [index in the log, first, end page]; read only."""
        return self._open

    def close(self) -> None:
        for request_id, run in list(self._open.items()):
            self._close_run(request_id, run)

    def events(self) -> list:
        self.close()
        return self._events


def merge_runs(events: list, trace: Trace, page_size: int) -> list:
    """``events`` (a per-page log) with a request's output pages between two lookups folded into runs."""
    runs = ProduceRuns(trace, page_size)
    for event in events:
        if isinstance(event, Lookup):
            runs.lookup(event)
        else:
            runs.produce(event.request_id, event.first_page, event.end_page)
    return runs.events()


class EventRecorder:
    """Subscribed to a timed run's ``StepStarted`` events: records the lookups and page allocations of every
    step that runs (runs of plain decode steps allocate nothing), into ``ProduceRuns`` (``merge_runs=False``:
    every allocation as its own event, the reference)."""

    def __init__(self, events: EventBus, trace: Trace, page_size: int, merge_runs: bool = True):
        self._trace, self._page = trace, page_size
        self._seen: dict[str, object] = {}  # request id -> the RequestCache of its current admission
        self._last_page: dict[str, int] = {}  # request id -> computed_pages, read once (a step per token)
        self._log = ProduceRuns(trace, page_size, merge_runs)
        # of a batch run's steps it reads only their batches' lengths (``record``): a batch reader
        events.subscribe_batch_reader(self._on_step_started)

    def _on_step_started(self, event) -> None:
        batch = event.batch
        if type(batch) is RunSteps:
            self._record_run(batch.full_steps, event.manager)
        else:
            self.record(batch, event.manager, event.num_steps)

    def _record_run(self, full_steps, manager) -> None:
        """A batch run's full steps told at once (``RunSteps``): each with a batch as its own ``StepStarted``."""
        record = self.record
        for full in full_steps:
            if full.batch is not None:
                record(full.batch, manager, full.num_steps)

    def record(self, batch, manager, num_steps: int = 1) -> None:
        """A step's batch; ``num_steps`` > 1: that many decode steps, each item a token further at each."""
        if type(batch) is DecodeBatch and (num_steps == 1 or RUN_FROM_LENGTHS):
            if num_steps == 1:
                self._record_decode_step(batch)
            else:
                self._record_decode_run(batch, num_steps)
            return
        if type(batch) is StretchSteps:  # a freeing stretch's page steps, told as one (``STRETCH_AS_ONE``)
            record_stretch(batch, self._page, self._log.open_runs, self._last_page, self._produce)
            return
        items = batch.items
        self._record_lookups(items, manager.requests)
        self._record_produced(items, 0)
        if num_steps > 1:
            self._record_later_steps(items, num_steps)

    def _record_produced(self, items, shift: int) -> None:
        """The pages each item computes, ``shift`` tokens further on (a decode's later step)."""
        page, produce = self._page, self._produce
        for item in items:  # a step per token at page 1 (every decoding request's page): kept lean
            plan = item.plan
            produce(plan.request_id, (plan.start + shift) // page, -(-(plan.end + shift) // page))

    def _produce(self, request_id: str, first: int, end: int) -> None:
        """Pages ``[first, end)`` computed by the request, those past its last computed page left out."""
        last = self._last_page.get(request_id)
        if last is None:
            last = self._last_page[request_id] = computed_pages(self._trace, request_id, self._page)
        if first < end and first < last:
            self._log.produce(request_id, first, end if end < last else last)

    def _record_decode_step(self, batch: DecodeBatch) -> None:
        """A batch run's decode-only step (``LAZY_DECODE_BATCH``), from its lengths: what ``record`` logs of its
        items. It looks up nothing: its requests run, so each was looked up at its admission's first chunk, a
        step of the loop's own. A token on a page its request's open run holds (``first <= page < end``) adds
        nothing (``ProduceRuns.produce`` folds it, the run unchanged); one on the page right after the run
        (``page == end``) extends it by that page where the request computes it (``page < computed_pages``: what
        ``_produce`` and ``ProduceRuns.produce`` do, written out: a run is opened only by a request's
        ``_produce``, which read its computed pages; ``INLINE_RUN_EXTENSION``); only the others are produced."""
        page, offset, runs, produce = self._page, batch.offset, self._log.open_runs, self._produce
        last_page = self._last_page
        for request_id, length in zip(batch.request_ids, batch.lengths, strict=True):
            first = (length + offset) // page
            run = runs.get(request_id)
            if run is None or not run[1] <= first < run[2]:
                if INLINE_RUN_EXTENSION and run is not None and first == run[2]:
                    if first < last_page[request_id]:
                        run[2] = first + 1
                    continue
                produce(request_id, first, first + 1)

    def _record_decode_run(self, batch: DecodeBatch, num_steps: int) -> None:
        """``num_steps`` one-token steps of a batch run from ``batch``'s lengths (``RUN_FROM_LENGTHS``): what
        ``record`` logs of its items. Nothing is looked up (as in ``_record_decode_step``); step 0's pages, then
        ``_record_later_steps``' moves on each token's position (a request whose run is open extends it at once,
        the others step by step)."""
        page, produce, offset = self._page, self._produce, batch.offset
        lengths = zip(batch.request_ids, batch.lengths, strict=True)
        tokens = [(request_id, length + offset) for request_id, length in lengths]
        for request_id, at in tokens:
            produce(request_id, at // page, -(-(at + 1) // page))
        open_runs = self._log.open_requests()
        one_by_one = [(request_id, at) for request_id, at in tokens if request_id not in open_runs]
        for request_id, at in tokens if len(one_by_one) < len(tokens) else ():
            first, last = at // page, self._last_page[request_id]
            if request_id in open_runs and first < last:
                end = -(-(at + num_steps) // page)
                self._log.produce(request_id, first, end if end < last else last)
        for shift in range(1, num_steps) if one_by_one else ():
            for request_id, at in one_by_one:
                produce(request_id, (at + shift) // page, -(-(at + shift + 1) // page))

    def _record_later_steps(self, items, num_steps: int) -> None:
        """Steps 1 .. ``num_steps`` - 1 of one-token decodes, as step after step would log them. A request whose
        run is open after step 0 only extends it: each later step's first page is at most the run's end (its
        token follows the last) and no lookup comes between, so the pages from step 0's to its last computing
        step's end, folded at once, give the same run; the others' steps are logged one by one, step then
        batch order."""
        open_runs = self._log.open_requests()
        one_by_one = [item for item in items if item.plan.request_id not in open_runs]
        for item in items if len(one_by_one) < len(items) else ():
            plan = item.plan
            first, last = plan.start // self._page, self._last_page[plan.request_id]
            if plan.request_id in open_runs and first < last:  # (past ``last`` no step computes a page)
                end = -(-(plan.end + num_steps - 1) // self._page)
                self._log.produce(plan.request_id, first, end if end < last else last)
        for shift in range(1, num_steps) if one_by_one else ():
            self._record_produced(one_by_one, shift)

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
