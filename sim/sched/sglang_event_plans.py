"""An SGLang batch run's event step's plans (``sglang_runs._event_step``): each request's in batch order
(``plan_each``, the reference, reading each request's pages itself; ``decode_plan``), or from what one pass read.

The event step with its requests read once (switch ``ONE_PASS``; off: ``event_step_fits``,
then ``_event_step``'s own reads, the reference), and on pools of anonymous ids the pages of its requests that only
start a page counted out together (switch ``PAGES_AT_ONCE``; off: an allocation each, ``prepare_page_decode``).

One pass (``event_step_needs``): for each request, whether its step is an event (the rules' ``plain_decode_steps``
at the step's iteration is not positive: it may take a checkpoint or fire its SWA free) and the pages it starts.
Whether the step fits is ``step_fits_room``'s answer: no request's commit pending, the pages within SGLang's room
(the KV pools' less the rules' slack and a page per request), and the new checkpoint states free on pools apart.
Where ``plain_decode_steps`` is positive, ``decode_checkpoint`` is None (docs/results/presets-speed.md, Round 18,
for the rules of ``sglang_runs.PAGE_ONLY_RULES``), so only the events are asked for a checkpoint.

At once (``take_anonymous_pages``): a page-only request's allocation on anonymous pools is a count off each KV
pool's ``num_free`` and fresh lists of ``ANONYMOUS_ID``; which request holds which id cannot differ (every id is
the same), and with the step's room checked no event request's plan (``prepare_decode``: its refusal, eviction
ahead and reservation act only where a pool is short) finds a pool short whether the others' pages are out yet
or not: every KV pool keeps the slack and a page per request past all the step's pages.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, Refusal, new_chunk_plan
from sim.sched.batch import Batch, BatchItem

ONE_PASS = True
PAGES_AT_ONCE = True
DECODE_PASS = True


class StepNeeds(NamedTuple):
    """What an event step asks of each request, in batch order."""

    events: list[bool]  # the step may take a checkpoint or fire the request's SWA free
    pages: list[int]  # the pages the step starts


def event_step_needs(
    manager: CacheManager, rules, reqs: list[RequestCache], iteration: int
) -> StepNeeds | None:
    """``event_step_fits`` and each request's event and pages in one pass; None where the step might evict
    (as ``step_fits_room`` answers it)."""
    phase = iteration + manager.policy.iteration_phase
    events: list[bool] = []
    pages: list[int] = []
    num_pages = num_states = 0
    for req in reqs:
        if req.commit_pending:
            return None
        event = rules.plain_decode_steps(req, phase) <= 0
        needed = req.pages_needed(req.kv_len + 1)
        if event and not req.spare_states and rules.decode_checkpoint(req) is not None:
            num_states += 1  # a non-event takes no checkpoint
        events.append(event)
        pages.append(needed)
        num_pages += needed
    room = manager.topology.kv_room(manager.has_swa) - rules.alloc_slack_pages - len(reqs)
    if room < num_pages:
        return None
    if num_states and not (
        manager.topology.name == "separate" and manager.pools[MAMBA].num_free >= num_states
    ):
        return None
    return StepNeeds(events, pages)


def begin_decode_pass(manager: CacheManager, rules, in_flight: frozenset[str], proved: bool) -> None:
    """A batch run's pass, begun by its first event step (``manager.begin_pass``): it only decodes, and of what
    SGLang's rules set for a pass (``SGLangAdmission.begin_pass``) a decode reads only the steps in flight (the
    SWA trigger's lag); the pass's budget is read only by admissions and chunks, which come after the next full
    step's own ``begin_pass`` (``DECODE_PASS``; ``proved``: the rules are SGLang's, ``PAGE_ONLY_RULES``)."""
    if DECODE_PASS and proved:
        rules.in_flight = in_flight
    else:
        manager.begin_pass(in_flight)


def pages_at_once(manager: CacheManager) -> bool:
    """Whether a step's page-only requests may take their pages together: the KV pools hand out anonymous ids."""
    pools = manager.pools
    return PAGES_AT_ONCE and pools[FULL].anonymous and (not manager.has_swa or pools[SWA].anonymous)


def take_anonymous_pages(manager: CacheManager, req: RequestCache, num_pages: int) -> None:
    """``prepare_page_decode`` on anonymous pools, less the count: the request's new pages (each pool's count
    is taken for the whole step by ``count_out_pages``)."""
    req.add_anonymous_pages(num_pages, manager.has_swa)
    req.planned = ()


def count_out_pages(manager: CacheManager, num_pages: int) -> None:
    """The step's page-only pages counted out of each KV pool at once (``take_anonymous_pages`` gave them)."""
    manager.pools[FULL].count_out(num_pages)
    if manager.has_swa:
        manager.pools[SWA].count_out(num_pages)


def plan_each(
    manager: CacheManager,
    reqs: list[RequestCache],
    eventful: list[bool],
    iteration: int,
    batch: Batch | None,
    page_only: bool,
) -> None:
    """The step's plans in batch order, each request's pages read here (the reference of ``plan_needs``)."""
    for req, event in zip(reqs, eventful, strict=True):
        num_pages = 0 if event else req.pages_needed(req.kv_len + 1)
        if event or num_pages:
            plan = decode_plan(manager, req, iteration, num_pages if page_only else 0, batch is not None)
            if plan is None:
                continue
        elif batch is None:
            continue
        else:
            plan = new_chunk_plan(req.request_id, req.kv_len, req.kv_len + 1, req.state)
        if batch is not None:
            batch.items.append(BatchItem(plan, False))


def plan_needs(
    manager: CacheManager, reqs: list[RequestCache], needs: StepNeeds, iteration: int, batch: Batch | None
) -> None:
    """``plan_each`` from the pages read already; on anonymous pools the page-only requests' pages counted out
    of the pools once for the step (``PAGES_AT_ONCE``)."""
    at_once, num_counted = pages_at_once(manager), 0
    for req, event, num_pages in zip(reqs, needs.events, needs.pages, strict=True):
        plan = None
        if event or (num_pages and not at_once):
            plan = decode_plan(manager, req, iteration, 0 if event else num_pages, batch is not None)
        elif num_pages:
            take_anonymous_pages(manager, req, num_pages)
            num_counted += num_pages
        if batch is not None:
            plan = (
                plan
                if plan is not None
                else new_chunk_plan(req.request_id, req.kv_len, req.kv_len + 1, req.state)
            )
            batch.items.append(BatchItem(plan, False))
    if num_counted:
        count_out_pages(manager, num_counted)


def decode_plan(
    manager: CacheManager, req: RequestCache, iteration: int, pages_alone: int, wanted: bool
) -> ChunkPlan | None:
    """The plan of an event step's request that takes a checkpoint, fires its SWA free or starts a page: the
    rules' ``prepare_decode``, or, for a step that only starts pages (``pages_alone`` of them), their
    allocation alone (``prepare_page_decode``: the step's room is checked, so the rest does nothing). None
    where only the plan is left and nobody reads it (not ``wanted``)."""
    if not pages_alone:
        plan = manager.prepare_decode(req.request_id, iteration)
        if isinstance(plan, Refusal):
            raise AssertionError(f"{req.request_id}: a batch run's event step refused ({plan})")
        return plan
    manager.prepare_page_decode(req, pages_alone)
    return new_chunk_plan(req.request_id, req.kv_len, req.kv_len + 1, req.state) if wanted else None
