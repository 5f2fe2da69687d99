"""Marconi's vLLM+ baseline (a MAMBA state at every 32-token block) on the default loop: Marconi's rules with
SGLang's gates left out. vLLM's own scheduler gates on vLLM's block pool (``full_sequence_must_fit``,
``allocate_slots``), which this radix tree of 32-token pages does not keep, and SGLang's budget is not vLLM's."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from sim.align import floor_to
from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.marconi_evict import MarconiEvictor
from sim.cache.engines.marconi_vllm_chunks import commit_leaf_chunk, reserve_page, takes_lru_leaves
from sim.cache.engines.marconi_vllm_page import commit_page, hand_top_leaf
from sim.cache.engines.marconi_vllm_run import run_applies, take_chunk_run
from sim.cache.engines.marconi_vllm_step import StepHold, end_step, hand_in_step
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import Refusal
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class MarconiVllmRules(MarconiRules):
    """vLLM+ on the default loop: Marconi's rules with none of SGLang's gates (no pass budget, no decode
    check, a request holding its running state only, a lone request requeued)."""

    admission_states = 1
    budget_before_states = False
    requeues_lone_request = True
    # False: every chunk evicts and commits through the general layers (the reference the direct ones,
    # ``marconi_vllm_chunks.py``, are held to)
    fused_chunks = True
    # False: a request's page chunks go one by one through ``reserve`` and ``after_prefill_chunk`` (the
    # reference the run, ``marconi_vllm_run.py``, is held to)
    chunk_runs = True
    # False: a page chunk of the default loop reserves and commits through ``reserve_page`` and
    # ``commit_leaf_chunk`` (the reference the run's statements, ``marconi_vllm_page.py``, are held to)
    page_steps = True

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.alloc_slack_pages = 0
        self.step = StepHold()  # a timed step's reservations, held as a chain (``marconi_vllm_step.py``)

    def begin_pass(self, manager: RadixOps, in_flight: AbstractSet[str] = frozenset()) -> None:
        """No pass accounts to reset: SGLang's budget is none of vLLM+'s gates (every rule that reads it,
        ``admission_refusal``, ``chunk_len``, ``decode_refusal``, is overridden here), and replay begins a
        pass at every 32-token chunk (tests/test_marconi_vllm_passes.py)."""

    def reserve(self, manager: RadixOps, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """LRU (the preset's eviction) tunes no alpha: the tuner's first-eviction hook, and the eviction
        count taken around the reserve for it, have nothing to do."""
        step = self.step
        if not self.tuner.done:
            end_step(step, self)
            return super().reserve(manager, full_pages, swa_pages, states)
        evictor = self.evictor(manager)
        if (
            self.fused_chunks
            and full_pages == 1
            and states == 1
            and self._bytes is None
            and takes_lru_leaves(evictor)
        ):
            takes_slots = self.page_steps and manager.takes_handed_slots  # type: ignore[attr-defined]
            return reserve_held_page(step, self, manager, swa_pages, takes_slots, evictor)
        end_step(step, self)
        return evictor.reserve(manager, full_pages, swa_pages, states)

    def before_prefill_chunk(self, manager: RadixOps, req: RequestCache) -> None:
        """A chunk the general calls take (it may evict ahead): a step's held entry and kept victims out first."""
        end_step(self.step, self)
        super().before_prefill_chunk(manager, req)

    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        """A chunk's checkpoint committed as one new leaf below the request's, where it is one
        (``commit_leaf_chunk``); else as Marconi commits it."""
        checkpoint = req.checkpoint
        if self.fused_chunks and self.every_page and self.recency.whole_paths and checkpoint is not None:
            end = checkpoint[0]
            if end <= req.prefix_len or (self.page_steps and commit_page(manager, self, req, end)):
                return
            if commit_leaf_chunk(manager, req, end, self.recency, self.window, self.has_mamba):
                return
        super().after_prefill_chunk(manager, req, is_last)

    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        return None

    def takes_page_chunks(self, manager: RadixOps) -> bool:
        """A state at every page, pools apart (a byte budget's shortfall is not a pool's count): each chunk
        stops at the next page and checkpoints there, no gate of SGLang's or slack is asked for, and the
        evictor evicts nothing while every pool has the room."""
        return self.every_page and self._bytes is None and not self.alloc_slack_pages

    def take_page_run(self, manager: RadixOps, req: RequestCache) -> int | Refusal | None:
        """The request's page chunks as one run (``marconi_vllm_run.py``) where its switches allow."""
        if self.chunk_runs and self.fused_chunks and run_applies(manager, self):
            return take_chunk_run(manager, self, req)
        return None

    def align_chunk(self, req: RequestCache, chunk_len: int) -> int:
        return floor_to(req.kv_len + chunk_len, self.page_size) - req.kv_len

    def chunk_len(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        return self.two_pass(req, chunk_len)

    def decode_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        return None


def reserve_held_page(
    hold: StepHold,
    rules: MarconiRules,
    manager: RadixOps,
    swa_pages: int,
    takes_slots: bool,
    evictor: MarconiEvictor | None = None,
) -> Refusal | None:
    """``MarconiVllmRules.reserve``'s steady branch (the tuner done, the direct chunks, LRU over leaves), shared
    with ``marconi_vllm_steady``'s plan: where the chunk takes handed slots, the hold's victim (``hand_in_step``)
    with the hold open or the heap's top (``hand_top_leaf``) without; else the hold ended and ``reserve_page``.
    ``evictor``: the rules' where the caller asked for it already (None: asked here, only when needed)."""
    if takes_slots and (
        hand_in_step(hold, rules, manager, swa_pages)
        if hold.is_open
        else hand_top_leaf(manager, rules, swa_pages)
    ):
        return None
    end_step(hold, rules)
    return reserve_page(manager, evictor if evictor is not None else rules.evictor(manager), swa_pages)
