"""A batch run's page starts carried (SGLang's rules, beside ``sglang_carried``'s due steps): each running request's
next page start read once as the run's step at which it falls (its *page due* step) and moved only where the
request gets a page, not read again off its lengths at every quiet stretch and event step.

A request's next page start, ``offset`` steps from the run's step ``at``, is ``(prefix_len // page + len(own_full))
* page - kv_len`` (``page_starts``): a step lengthens it by one and lowers the offset by one, so ``at + offset``
holds until the request gets a page. A quiet stretch hands a page to each of its starts, the request's next start
then a page past its last one; an event step hands the page it needs to each request whose start it is, and only
its events (checkpoint, SWA free) may move anything else: those requests are read again. What else may move a
request (the step in flight processed, an idle fold) drops them all, read again at their next use.
"""

from __future__ import annotations

from sim.cache.components import FULL, SWA
from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.plain_decodes import counted_starts, fitting_starts
from sim.cache.request import RequestCache
from sim.sched.batch import FullStep, batch_lengths, page_step_batch, page_step_runs, take_stretch
from sim.sched.sglang_event_plans import StepNeeds

# True: a carried run's quiet stretches and event steps read its requests' page starts carried (``PageDues``) and a
# stretch hands its pages out per request started; False: ``stretch_within``'s ``page_starts`` read off the lengths
# each time and ``take_batch_decodes`` (the reference; tests/test_sglang_carried_starts_property.py)
CARRY_PAGE_STARTS = True


class PageDues:
    """Each running request's next page start as the run's step it falls at, in batch order (None: to be read)."""

    __slots__ = ("reqs", "page", "dues")

    def __init__(self, reqs: list[RequestCache], page: int):
        self.reqs, self.page = reqs, page
        self.dues: list[int] | None = None

    def dues_at(self, at: int) -> list[int]:
        """The page due steps at the run's step ``at``: carried, or read off the lengths where dropped."""
        dues = self.dues
        if dues is None:
            dues = self.dues = [at + next_start(req, self.page) for req in self.reqs]
        return dues

    def pages_needed(self, at: int) -> list[int]:
        """Each request's ``pages_needed(kv_len + 1)`` at the run's step ``at``: the pages its next token starts
        (``kv_len // page + 1 - held``, ``held * page - kv_len`` being its start's offset ``due - at``)."""
        page = self.page
        return [0 if due > at else (at - due) // page + 1 for due in self.dues_at(at)]

    def stepped(
        self, needs: StepNeeds, at: int, silent: list[int] | None, rules: SGLangRules, phase: int
    ) -> None:
        """After an event step (``needs``: its events and the pages it handed each request), at the run's next
        step ``at``: the requests that got a page or had an event read again, the others' kept; in the same walk
        the events' due steps ``silent`` (``CarriedSilence``'s, None: not carried) read again off ``rules``."""
        dues, page, plain = self.dues, self.page, rules.plain_decode_steps
        for index, (event, pages) in enumerate(zip(needs.events, needs.pages, strict=True)):
            if event or pages:
                req = self.reqs[index]
                if dues is not None:
                    dues[index] = at + next_start(req, page)
                if event and silent is not None:
                    silent[index] = at + plain(req, at + phase)

    def stretch(
        self, manager: CacheManager, iteration: int, done: int, steps: int, announced: bool
    ) -> tuple[int, list[FullStep]]:
        """``stretch_within`` and ``take_stretch`` of the next ``steps`` steps (none takes a checkpoint or frees
        SWA, no commit is pending) with the carried starts: those whose pages fit taken, their starts handed out
        per request, and each started request's next start a page past its last."""
        reqs, at = self.reqs, iteration + done
        spare = manager.batch_run_room(reqs)
        if steps <= 0 or spare < 0:
            return 0, []
        dues = self.dues_at(at)
        if self.page == 1 and min(dues) == at == max(dues):  # lockstep: the reference's, a page each a step
            stretch = min(steps, spare // len(reqs))
            self.dues = [at + stretch] * len(reqs)
            return take_stretch(manager, reqs, iteration, done, stretch, None, announced)
        starts = self.starts_within(at, steps)
        if starts is None:  # a request lacks slots below its length: no run
            return 0, []
        stretch, starts = fitting_starts(starts, steps, spare)
        if not stretch:
            return 0, []
        return stretch, self.take(manager, iteration, done, stretch, starts, announced)

    def take(
        self,
        manager: CacheManager,
        iteration: int,
        done: int,
        stretch: int,
        starts: list[tuple[int, int]],
        announced: bool,
    ) -> list[FullStep]:
        """``take_stretch`` of the ``stretch`` steps from ``iteration + done`` on whose page starts are ``starts``:
        the pages handed out, each started request's next start a page past its last, the lengths moved; the
        page-starting steps as full steps (``page_step_runs``), each with its batch where it is ``announced``."""
        reqs, at = self.reqs, iteration + done
        lengths, dues = batch_lengths(reqs, announced), self.dues_at(at)
        if starts:
            hand_out_each(manager, reqs, starts)
            for offset, index in starts:  # sorted: the last one a request got sets its next
                dues[index] = at + offset + self.page
        for req in reqs:
            manager.take_plain_decodes(req, stretch)
        full_steps: list[FullStep] = []
        for run in page_step_runs(counted_starts(starts), done):
            batch = page_step_batch(reqs, lengths, iteration + run.offset, run.offset - done)
            full_steps.append(run if batch is None else run._replace(batch=batch))
        return full_steps

    def starts_within(self, at: int, steps: int) -> list[tuple[int, int]] | None:
        """``page_starts`` of the next ``steps`` steps from the carried dues: (step offset, index), sorted; None
        where a request lacks slots below its length."""
        page, end = self.page, at + steps
        starts: list[tuple[int, int]] = []
        for index, due in enumerate(self.dues_at(at)):
            if due >= end:
                continue
            if due < at:
                return None
            if due + page >= end:  # the usual case: one start in the stretch
                starts.append((due - at, index))
            else:
                starts.extend((offset, index) for offset in range(due - at, steps, page))
        if len(starts) > 1:
            starts.sort()
        return starts


def next_start(req: RequestCache, page: int) -> int:
    """Steps from now to the request's next page start (``page_starts``' first offset; negative: it lacks slots)."""
    return (req.prefix_len // page + len(req.own_full)) * page - req.kv_len


def hand_out_each(manager: CacheManager, reqs: list[RequestCache], starts: list[tuple[int, int]]) -> None:
    """``hand_out_starts``: the ids a pool hands out at once for ``starts`` (sorted), each appended to its request
    in start order (a request's pages are its own lists: appended one by one, they hold what its pages appended at
    once hold), rather than laid out for every request of the batch first (a stretch starts a page for a few)."""
    num_starts = len(starts)
    full = manager.pools[FULL].alloc(num_starts)
    swa = manager.pools[SWA].alloc(num_starts) if manager.has_swa else [None] * num_starts
    for (_, index), full_id, swa_id in zip(starts, full, swa, strict=True):
        reqs[index].add_own_pages([full_id], [swa_id])
