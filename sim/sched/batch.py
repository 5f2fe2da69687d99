"""One engine step's batch: which requests run which tokens (a prefill chunk or one decode token each), and
what the step's end changed (first tokens, finished requests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from sim.cache import plain_decodes
from sim.cache.components import MAMBA, Component
from sim.cache.interface import RequestView
from sim.cache.manager import CacheManager
from sim.cache.pools import PoolUsage
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, new_chunk_plan
from sim.sched.request import RequestState

# False: a quiet stretch's take computes its page starts again (the reference; tests/test_stretch_starts_once.py
# holds both equal); True: the question hands the take the starts it computed
PAGE_STARTS_ONCE = True
# True: a page-starting step's batch keeps its requests' ids, states and lengths and makes its items when first
# read (the bounds' recorder reads the lengths: ``DecodeBatch``); False: the items made at once (the reference;
# tests/test_bounds_fast_paths_property.py holds both equal)
LAZY_DECODE_BATCH = True


@dataclass(frozen=True)
class BatchItem:
    plan: ChunkPlan
    is_prefill: bool
    copy_state_from: int | None = None  # set on a request's first chunk: resume from this tree state


@dataclass
class Batch:
    iteration: int
    items: list[BatchItem] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.items)


class DecodeBatch(Batch):
    """The batch of a decode-only step of a batch run: request ``request_ids[i]`` computes its token at
    ``lengths[i] + offset`` on its state ``states[i]`` (as read when the batch was made). At a page step of a
    short batch, making every item cost more than the bounds' recorder's whole work on them. ``plans``: an
    event step's (``loop_runs``), each request's plan where its step was planned in full, None where it was
    quiet (its plan would be the plain one the lengths make). Made from the requests (``of_requests``) or,
    for a cache whose requests are not ``RequestCache``s, from their ids (``of_ids``)."""

    def __init__(
        self,
        iteration: int,
        request_ids: list[str],
        states: list[int | None],
        lengths: list[int],
        offset: int,
        plans: list[ChunkPlan | None] | None = None,
    ):
        self.iteration, self.lengths, self.offset, self.plans = iteration, lengths, offset, plans
        self.request_ids, self.states = request_ids, states
        self._items: list[BatchItem] | None = None

    @classmethod
    def of_requests(
        cls,
        iteration: int,
        reqs: list[RequestCache],
        lengths: list[int],
        offset: int,
        plans: list[ChunkPlan | None] | None = None,
    ) -> DecodeBatch:
        """The batch of ``reqs``, each on its state as it is now."""
        ids, states = [req.request_id for req in reqs], [req.state for req in reqs]
        return cls(iteration, ids, states, lengths, offset, plans)

    @classmethod
    def of_ids(cls, iteration: int, request_ids: list[str], lengths: list[int], offset: int) -> DecodeBatch:
        """The batch of requests known by id whose plans carry no state (vLLM's blocks: ``ChunkPlan.state_id``
        None; ``vllm_runs.py``'s batch runs)."""
        return cls(iteration, request_ids, [None] * len(request_ids), lengths, offset)

    @property
    def items(self) -> list[BatchItem]:
        if self._items is None:
            offset = self.offset
            self._items = [
                BatchItem(new_chunk_plan(request_id, length + offset, length + offset + 1, state), False)
                for request_id, length, state in zip(self.request_ids, self.lengths, self.states, strict=True)
            ]
            for index, plan in enumerate(self.plans or ()):
                if plan is not None:
                    self._items[index] = BatchItem(plan, False)
        return self._items

    @items.setter
    def items(self, items: list[BatchItem]) -> None:
        self._items = items

    def __bool__(self) -> bool:
        return bool(self.lengths)


@dataclass(frozen=True)
class StepOutcome:
    first_tokens: list[RequestState]  # requests whose prompt finished this step
    finished: list[RequestState]


class FullStep(NamedTuple):
    """A step of a decode run that the loop would have taken in full (``sim/sched/sglang_runs.py``, ``loop_runs.py``): its offset in
    the run, the pages it started, its batch (None where nothing reads it: a step that only started pages, with
    no bounds recorded), and for an event step the pools after it (None: only pages moved from free to
    running). ``num_steps`` > 1: that many steps from ``offset`` on, each starting ``pages`` pages, no batch.
    ``finished``: the requests the step ended (the SGLang overlap loop's run through a last output), in the
    order the loop's full step reports them."""

    offset: int
    pages: int
    batch: Batch | None
    usage: dict[Component, PoolUsage] | None
    num_steps: int = 1
    finished: tuple[RequestState, ...] = ()
    swa_freed: int = 0  # SWA pages its first step freed (``swa_free_runs.py``), moved from running to free


def page_step_runs(page_steps: list[tuple[int, int]], done: int) -> list[FullStep]:
    """Steps that only started pages, ``(offset, pages)`` from ``done`` on, as ``FullStep``s without a batch, a
    run of consecutive steps starting the same pages each as one (``num_steps``: at page 1, every step). The
    step log writes such a run as column blocks; its batch, where the bounds read it, is its first step's."""
    runs: list[FullStep] = []
    first = end = pages_each = 0
    for offset, pages in page_steps:
        if offset != end or pages != pages_each:
            if end > first:
                runs.append(FullStep(done + first, pages_each, None, None, end - first))
            first, pages_each = offset, pages
        end = offset + 1
    if end > first:
        runs.append(FullStep(done + first, pages_each, None, None, end - first))
    return runs


def batch_lengths(reqs: Sequence[RequestView], announced: bool) -> list[int] | None:
    """The requests' lengths before a run, which its steps' batches are made from (``page_step_batch``,
    ``DecodeBatch``), where the bounds read them (``announced``); None where no batch is made."""
    return [req.kv_len for req in reqs] if announced else None


def page_step_batch(
    reqs: list[RequestCache], lengths: list[int] | None, iteration: int, offset: int
) -> Batch | None:
    """The batch of a step that only started pages, ``offset`` steps after ``lengths`` (None: not wanted): each
    request's next token (a run's later steps are each a token further)."""
    if lengths is None:
        return None
    if LAZY_DECODE_BATCH:
        return DecodeBatch.of_requests(iteration, reqs, lengths, offset)
    batch = Batch(iteration)
    for req, length in zip(reqs, lengths, strict=True):
        start = length + offset
        batch.items.append(BatchItem(new_chunk_plan(req.request_id, start, start + 1, req.state), False))
    return batch


def step_fits_room(manager: CacheManager, reqs: list[RequestCache], room_pages: int) -> bool:
    """Whether a decode step of ``reqs`` taken in full evicts nothing: its pages fit ``room_pages`` (what the
    loop leaves after a page per request and its slack) and its new checkpoint states are free (on pools
    apart: a byte budget weighs them with KV). Both batch-run loops ask it before an event step."""
    pages = 0
    for req in reqs:
        if req.commit_pending:
            return False
        pages += req.pages_needed(req.kv_len + 1)
    if room_pages < pages:
        return False
    rules = manager.rules
    states = sum(1 for req in reqs if rules.decode_checkpoint(req) is not None and not req.spare_states)
    if not states:
        return True
    return manager.topology.name == "separate" and manager.pools[MAMBA].num_free >= states


def take_quiet_stretch(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    max_steps: int,
    announced: bool,
) -> tuple[int, list[FullStep]]:
    """The decode steps from ``iteration + done`` on that evict nothing and need no event (a batch-run loop's
    quiet stretch: none where the next step needs one), taken at once; their page-starting steps as full
    steps, consecutive ones starting the same pages (at page 1, every step) as one: column blocks.
    ``announced``: the bounds read each full step's batch."""
    if PAGE_STARTS_ONCE:
        stretch, starts = manager.batch_decode_stretch(reqs, iteration + done, max_steps - done)
    else:
        stretch, starts = manager.batch_decode_steps(reqs, iteration + done, max_steps - done), None
    return take_stretch(manager, reqs, iteration, done, stretch, starts, announced)


def take_stretch(
    manager: CacheManager,
    reqs: list[RequestCache],
    iteration: int,
    done: int,
    stretch: int,
    starts: list[tuple[int, int]] | None,
    announced: bool,
) -> tuple[int, list[FullStep]]:
    """``take_quiet_stretch`` past its question: the ``stretch`` steps from ``iteration + done`` on, whose page
    starts ``batch_decode_stretch`` answered (``starts``), taken; none where ``stretch`` is 0."""
    if not stretch:
        return 0, []
    lengths = batch_lengths(reqs, announced)
    full_steps: list[FullStep] = []
    for run in _taken_runs(manager, reqs, stretch, starts, done):
        batch = page_step_batch(reqs, lengths, iteration + run.offset, run.offset - done)
        full_steps.append(run if batch is None else run._replace(batch=batch))
    return stretch, full_steps


def _taken_runs(
    manager: CacheManager,
    reqs: list[RequestCache],
    stretch: int,
    starts: list[tuple[int, int]] | None,
    done: int,
) -> list[FullStep]:
    """The stretch taken (``take_batch_decodes``) and its page-starting steps as runs (``page_step_runs``); a
    lockstep stretch on anonymous pools at once, as the one run its pairs make (``LOCKSTEP_RUN_AT_ONCE``)."""
    if starts is None and plain_decodes.LOCKSTEP_RUN_AT_ONCE:
        pages = manager.take_lockstep_run(reqs, stretch)
        if pages is not None:
            return [FullStep(done, pages, None, None, stretch)]
    return page_step_runs(manager.take_batch_decodes(reqs, stretch, starts), done)
