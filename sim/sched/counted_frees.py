"""A freeing stretch's SWA frees (``sglang_free_stretch.py``) taken request by request, where the SWA pool only
counts them, and its page starts handed out in one go.

The reference (``sglang_free_stretch._take_frees``) walks the stretch's due steps in step then batch order from a
heap, handing out the page starts before each due step first: on a pool of real ids a free gives back ids that the
next allocation hands out again, so the order is the ids'. On an anonymous SWA pool nobody watches the frees of
(``Pool.counts_frees``: every id ``ANONYMOUS_ID``, a free only a count), with no ``SwaFreed`` listener, that order
moves nothing anyone reads: a request's free reads only the request itself (its length, steps, frontier and own
SWA list, whose pages below the frontier were all started before the free's step, so the later starts cannot
reach its span), the steps in flight and the iteration, and the FULL pool is not touched by a free. So each
request walks its own due steps in turn (the same ``plain_decode_steps`` asks and ``free_out_of_window`` calls
at the same lengths and steps), and the stretch's starts go out at once after. At 4,000 ``no-cache`` requests:
~19,000 heap entries and ~13,000 allocations between due steps of ~3,800 stretches. Switch: ``COUNTED_FREES``
(off: the reference; tests/test_counted_frees_property.py holds both equal).
"""

from __future__ import annotations

from sim.cache.components import FULL, SWA
from sim.cache.engines.nocache import NoCacheRules
from sim.cache.events import SwaFreed
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache

COUNTED_FREES = True


def frees_by_request(manager: CacheManager) -> bool:
    """Whether the stretch's frees may go request by request: KV pools of anonymous ids, the SWA pool's frees only
    counted, no ``SwaFreed`` listener (the order of the frees and starts unread)."""
    if not COUNTED_FREES or not manager.rules.resolved.has_swa or not manager.pools[FULL].anonymous:
        return False
    return manager.pools[SWA].counts_frees and not manager.events.channel(SwaFreed)


class RequestFrees:
    """The stretch's frees taken request by request (the null rules' trigger and target asked directly: the
    rules are ``NoCacheRules`` exactly, ``stretch_takes_frees``): each due step's offset, the SWA pages freed at
    each step that freed some, per request its first page start's offset and how many of its starts are given."""

    def __init__(self, manager: CacheManager, reqs: list[RequestCache], iteration: int) -> None:
        rules = manager.rules
        assert isinstance(rules, NoCacheRules)
        self.manager, self.rules, self.reqs, self.iteration = manager, rules, reqs, iteration
        self.phase = iteration + manager.policy.iteration_phase
        self.due: set[int] = set()
        self.freed_at: dict[int, int] = {}
        page = manager.page_size
        self.firsts = [(req.prefix_len // page + len(req.own_full)) * page - req.kv_len for req in reqs]
        self.given = [0] * len(reqs)
        # starts handed out before a free could reach them (a window shorter than the stretch)
        self.num_given = 0

    def take(self, fitting: int) -> tuple[list[int], list[tuple[int, int]]]:
        """Each request's frees among the first ``fitting`` steps, request by request; the due steps' offsets
        (sorted) and (offset, SWA pages freed), sorted. The requests' lengths are as before."""
        for index in range(len(self.reqs)):
            self._take_request(index, fitting)
        return sorted(self.due), sorted(self.freed_at.items())

    def _take_request(self, index: int, fitting: int) -> None:
        """The request's due steps in turn, each asked as ``_push_due`` asks (its silence, ``plain_decode_steps``,
        from the step after the last due step), each freed as ``free_out_of_window`` frees; its length and steps
        put back after."""
        req, trigger = self.reqs[index], self.rules.trigger
        kv_len, decode_steps = req.kv_len, req.decode_steps
        offset = 0
        while offset < fitting:
            req.kv_len, req.decode_steps = kv_len + offset, decode_steps + offset
            silent = trigger.silent_steps(req, self.phase + offset)
            if offset + silent >= fitting:
                break
            offset += max(silent, 0)
            req.kv_len, req.decode_steps = kv_len + offset, decode_steps + offset
            target = self.rules.decode_free_target(req, self.phase + offset)
            if target is not None and target > req.swa_frontier:
                self._free(index, offset, target)
            self.due.add(offset)
            offset += 1
        req.kv_len, req.decode_steps = kv_len, decode_steps

    def _free(self, index: int, offset: int, target: int) -> None:
        """``free_swa_below`` at the step ``offset`` (no ``SwaFreed`` to tell), its pages counted to the step. A
        free below ``target`` reaches no page the stretch starts while ``target`` (at most the length less the
        window) lies below the request's first start; else its starts before the step are handed out first."""
        if offset - self.rules.window > self.firsts[index]:
            self._hand_out_before(index, offset)
        num_freed = self.reqs[index].free_own_swa_below(target, self.manager.pools[SWA])
        if num_freed:
            self.freed_at[offset] = self.freed_at.get(offset, 0) + num_freed

    def _hand_out_before(self, index: int, offset: int) -> None:
        """The request's page starts at steps before ``offset`` not yet handed out, as ``hand_out_starts`` hands
        out a request's (the ids all ``ANONYMOUS_ID``: which pool call hands them out is unread)."""
        num_starts = len(range(self.firsts[index], offset, self.manager.page_size))
        more = num_starts - self.given[index]
        if more > 0:
            pools = self.manager.pools
            self.reqs[index].add_own_pages(pools[FULL].alloc(more), pools[SWA].alloc(more))
            self.given[index] = num_starts
            self.num_given += more

    def hand_out_rest(self, stretch: int) -> None:
        """Each request's page starts before the stretch's end (``stretch`` steps) not handed out yet: where none
        was, counted out of both pools at once and added as ``add_anonymous_pages`` adds them (the ids the
        reference's pieces would list, all ``ANONYMOUS_ID``), to requests that hold pages already."""
        reqs, page = self.reqs, self.manager.page_size
        if self.num_given or not all(req.own_full for req in reqs):
            for index in range(len(reqs)):
                self._hand_out_before(index, stretch)
            return
        counts = [len(range(first, stretch, page)) for first in self.firsts]
        total = sum(counts)
        if total:
            self.manager.pools[FULL].count_out(total)
            self.manager.pools[SWA].count_out(total)
        for req, count in zip(reqs, counts, strict=True):
            if count:
                req.add_anonymous_pages(count, True)
