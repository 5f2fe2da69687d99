"""Runs of decode steps counted and taken without the bookkeeping of each step.

A decode step is *plain* when it needs no page, takes no checkpoint and fires no SWA free: the timed
engine's fast path takes runs of those for a whole batch (its step table reads the pools as unchanged). A
request decoding alone (replay mode, Marconi's tuner) also takes runs of *solo* steps: plain but for the pages
they start, which the pools hand out without evicting (so no step's reservation, eviction ahead or decode
refusal does anything but allocate); the run's pages are allocated in one go, as the steps would take them
one by one. A running batch (the SGLang loop in timed mode) takes runs of *batch* steps: plain but for the pages
they start, in step then batch order, while every KV pool keeps room for a page per request and the engine's
slack after each step (so no step's check, eviction or reservation does anything but allocate). The tests hold
all three to the step-by-step result.
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter

from sim.cache import decode_runs
from sim.cache.components import FULL, SWA
from sim.cache.request import RequestCache
from sim.cache.step_plans import StepPlans

# True: a lockstep take on anonymous pools (Marconi's, page 1) gives each request its run of ids at once and
# answers the run as one (pages a step, steps); False: ``take_batch_decodes`` (the reference: the pools' list
# of every id, sliced per request, and a pair per step). tests/test_lockstep_run.py holds both equal.
LOCKSTEP_RUN_AT_ONCE = True
# True: a take's sorted page starts counted per offset in one walk (a stretch starts a few pages: building a
# ``Counter`` cost ~5x the walk); False: a ``Counter`` (the reference; tests/test_sglang_carried_property.py)
STARTS_COUNTED_IN_ORDER = True


class PlainDecodes(StepPlans):
    """A base of ``CacheManager``: uses its ``requests``, ``rules``, ``policy``, ``page_size``, ``pools``,
    ``topology``, ``has_swa``, ``prepare_decode`` and ``complete_decode``."""

    def advance_decode(self, request_id: str, num_steps: int, iteration: int) -> int:
        """Up to ``num_steps`` decode steps from ``iteration`` on, exactly as step by step (``decode_runs``)."""
        return decode_runs.advance_decode(self, request_id, num_steps, iteration)

    def solo_decode_steps(self, req: RequestCache, iteration: int) -> int:
        """How many decode steps from ``iteration`` on are plain but for the pages they start, which the pools
        hand out without evicting (with the engine's slack kept free), or fewer."""
        room = self.topology.kv_room(self.has_swa) - self.rules.alloc_slack_pages
        if room < 0 or req.commit_pending:  # a commit waits for the next step's processing
            return 0
        held = req.prefix_len // self.page_size + len(req.own_full)
        steps = (held + room) * self.page_size - req.kv_len
        rule_steps = self.rules.plain_decode_steps(req, iteration + self.policy.iteration_phase)
        return max(min(steps, rule_steps), 0)

    def take_solo_decodes(self, req: RequestCache, num_steps: int) -> None:
        """What ``num_steps`` solo decode steps record: the pages they start, allocated in one go (a pool
        hands out ``n`` ids at once as it would one by one), and the lengths."""
        num_pages = req.pages_needed(req.kv_len + num_steps)
        if num_pages:
            self.add_new_pages(req, num_pages)
        self.take_plain_decodes(req, num_steps)

    def take_plain_decodes(self, req: RequestCache, num_steps: int) -> None:
        """What ``num_steps`` plain decode steps record: only the lengths move."""
        self._pass_open = False  # steps completed, as ``complete_decode`` records
        req.kv_len += num_steps
        req.decode_steps += num_steps

    def batch_decode_steps(self, reqs: list[RequestCache], iteration: int, max_steps: int) -> int:
        """How many of the next ``max_steps`` decode steps of the batch ``reqs`` (a token each per step, from
        ``iteration`` on) take no checkpoint and free no SWA while the pages they start leave, after each step,
        room for a page per request and the engine's slack in every KV pool; 0 where that cannot be said."""
        return self.batch_decode_stretch(reqs, iteration, max_steps)[0]

    def batch_decode_stretch(
        self, reqs: list[RequestCache], iteration: int, max_steps: int
    ) -> tuple[int, list[tuple[int, int]] | None]:
        """``batch_decode_steps``, and the page starts of that many steps (``page_starts``) where it computed
        them on the way (None in lockstep or where it answers 0): what ``take_batch_decodes`` would compute
        again, handed to it while nothing moves in between."""
        phase, steps = iteration + self.policy.iteration_phase, max_steps
        for req in reqs:
            if req.commit_pending:  # a commit waits for the next step's processing
                return 0, None
            steps = min(steps, self.rules.plain_decode_steps(req, phase))
        return self.stretch_within(reqs, steps)

    def stretch_within(
        self, reqs: list[RequestCache], steps: int
    ) -> tuple[int, list[tuple[int, int]] | None]:
        """``batch_decode_stretch`` past the rules: of the batch's next ``steps`` steps (none takes a checkpoint
        or frees SWA, no commit is pending), those whose pages fit the run's room, and their page starts."""
        spare = self.batch_run_room(reqs)
        if steps <= 0 or spare < 0:
            return 0, None
        if self._in_lockstep(reqs):  # a page per request at every step
            return min(steps, spare // len(reqs)), None
        starts = self.page_starts(reqs, steps)
        if starts is None:
            return 0, None
        return fitting_starts(starts, steps, spare)

    def batch_run_room(self, reqs: list[RequestCache]) -> int:
        """Pages a batch run may start without evicting: each KV pool keeps a page per request and the slack."""
        return self.topology.kv_room(self.has_swa) - self.rules.alloc_slack_pages - len(reqs)

    def take_batch_decodes(
        self, reqs: list[RequestCache], num_steps: int, starts: list[tuple[int, int]] | None = None
    ) -> list[tuple[int, int]]:
        """What ``num_steps`` batch decode steps record: the pages they start, handed out in step then batch
        order (a pool hands out ``n`` ids at once as it would one by one, and nothing is freed in between), and
        the lengths. Returns each page-starting step's offset in the run and its number of pages. ``starts``:
        those steps' page starts as ``batch_decode_stretch`` computed them (None: computed here)."""
        if starts is None:
            if self._in_lockstep(reqs):
                return self._take_lockstep(reqs, num_steps)
            starts = self.page_starts(reqs, num_steps) or []
        if starts:
            self.hand_out_starts(reqs, starts)
        for req in reqs:
            self.take_plain_decodes(req, num_steps)
        return counted_starts(starts)

    def hand_out_starts(self, reqs: list[RequestCache], starts: list[tuple[int, int]]) -> None:
        """A page for each of ``starts`` ((step offset, index in ``reqs``), sorted), handed out in that order: a
        pool hands out ``n`` ids at once as it would one by one, and nothing is freed in between."""
        full = self.pools[FULL].alloc(len(starts))
        swa = self.pools[SWA].alloc(len(starts)) if self.has_swa else [None] * len(starts)
        own_full: list[list[int]] = [[] for _ in reqs]
        own_swa: list[list[int | None]] = [[] for _ in reqs]
        for (_, index), full_id, swa_id in zip(starts, full, swa, strict=True):
            own_full[index].append(full_id)
            own_swa[index].append(swa_id)
        for req, full_ids, swa_ids in zip(reqs, own_full, own_swa, strict=True):
            if full_ids:
                req.add_own_pages(full_ids, swa_ids)

    def _in_lockstep(self, reqs: list[RequestCache]) -> bool:
        """At page 1, requests whose slots end at their length start a page each at every step."""
        if self.page_size != 1:
            return False
        return all(req.prefix_len + len(req.own_full) == req.kv_len for req in reqs)

    def _take_lockstep(self, reqs: list[RequestCache], num_steps: int) -> list[tuple[int, int]]:
        """``take_batch_decodes`` in lockstep: step by step, each request in turn, so request ``j`` of ``n``
        gets every ``n``-th id from the ``j``-th."""
        num_reqs = len(reqs)
        full = self.pools[FULL].alloc(num_steps * num_reqs)
        swa = self.pools[SWA].alloc(num_steps * num_reqs) if self.has_swa else None
        for index, req in enumerate(reqs):
            req.add_own_pages(
                full[index::num_reqs], swa[index::num_reqs] if swa is not None else [None] * num_steps
            )
            self.take_plain_decodes(req, num_steps)
        return [(offset, num_reqs) for offset in range(num_steps)]

    def take_lockstep_run(self, reqs: list[RequestCache], num_steps: int) -> int | None:
        """``take_batch_decodes`` of a lockstep run on anonymous pools: the pools count the ids out as one
        ``alloc`` (FULL, then SWA) would, each request gets ``num_steps`` anonymous ids (what its slice of
        that list held), and the answer is the pages each step starts; None (nothing taken) elsewhere."""
        full_pool, swa_pool = self.pools[FULL], self.pools[SWA] if self.has_swa else None
        if not full_pool.anonymous or (swa_pool is not None and not swa_pool.anonymous):
            return None
        if not self._in_lockstep(reqs):
            return None
        num_reqs = len(reqs)
        full_pool.count_out(num_steps * num_reqs)
        if swa_pool is not None:
            swa_pool.count_out(num_steps * num_reqs)
        for req in reqs:
            req.add_anonymous_pages(num_steps, swa_pool is not None)
            self.take_plain_decodes(req, num_steps)
        return num_reqs

    def page_starts(self, reqs: list[RequestCache], num_steps: int) -> list[tuple[int, int]] | None:
        """(step offset, index in ``reqs``) of every page the next ``num_steps`` decode steps start, in step then
        batch order (None if a request lacks slots below its length: no run is taken then)."""
        page = self.page_size
        starts: list[tuple[int, int]] = []
        for index, req in enumerate(reqs):
            first = (req.prefix_len // page + len(req.own_full)) * page - req.kv_len
            if first < 0:
                return None
            starts.extend((offset, index) for offset in range(first, num_steps, page))
        starts.sort()
        return starts

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        """How many decode steps from ``iteration`` on are plain (no page to allocate, no checkpoint,
        no SWA free fires, no eviction for the engine's slack), or fewer."""
        if not self._has_slack() or req.commit_pending:  # a commit waits for the next step's processing
            return 0
        steps = (req.prefix_len // self.page_size + len(req.own_full)) * self.page_size - req.kv_len
        rule_steps = self.rules.plain_decode_steps(req, iteration + self.policy.iteration_phase)
        return max(min(steps, rule_steps), 0)

    def stalled_chunk_steps(self, request_id: str, budget: int, max_steps: int) -> int:
        """How many of the next ``max_steps`` plain decode steps of the other requests leave this request's
        next prefill chunk sized to nothing (``next_chunk_len`` answers 0 under ``budget``), taken as the rules
        answer it: a chunk stalled at a step was stalled at every step before."""
        req = self.requests[request_id]
        chunk = self.rules.budgeted_chunk(req, budget)
        if chunk <= 0:
            return max_steps
        stalled, unknown = 0, max_steps  # stalled for the first ``stalled`` steps, not beyond ``unknown``
        while stalled < unknown:
            steps = (stalled + unknown + 1) // 2
            if self.rules.chunk_stalled_at(self, req, chunk, steps - 1):
                stalled = steps
            else:
                unknown = steps - 1
        return stalled

    def _has_slack(self) -> bool:
        """Whether each KV pool already has the engine's slack free (a decode step would evict nothing)."""
        slack = self.rules.alloc_slack_pages
        if not slack:
            return True
        return self.pools[FULL].num_free >= slack and (not self.has_swa or self.pools[SWA].num_free >= slack)


def fitting_starts(
    starts: list[tuple[int, int]], steps: int, spare: int
) -> tuple[int, list[tuple[int, int]]]:
    """Of a stretch of ``steps`` steps and its page starts (sorted), what may be taken with ``spare`` pages: all of
    it where every start fits, else the steps before the one whose page would not fit, with their starts."""
    if len(starts) <= spare:
        return steps, starts
    stretch, cut = starts[spare][0], spare
    while cut and starts[cut - 1][0] == stretch:
        cut -= 1
    return stretch, starts[:cut]


def counted_starts(starts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(offset, pages started) per step offset of sorted page starts."""
    if not STARTS_COUNTED_IN_ORDER:
        return list(Counter(map(itemgetter(0), starts)).items())  # a dict keeps the sorted offsets' order
    counted: list[tuple[int, int]] = []
    last = -1  # offsets are never negative
    for offset, _ in starts:
        if offset == last:
            counted[-1] = (offset, counted[-1][1] + 1)
        else:
            counted.append((offset, 1))
            last = offset
    return counted
