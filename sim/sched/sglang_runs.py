"""The SGLang loop's batch decode runs (timed mode): the running batch's decode steps taken in one event, with
nothing to admit, process or finish in between, exactly as the loop's full steps would take them.

A run is stretches of steps that take no checkpoint and free no SWA (``batch_decode_steps``: only the pages they
start are allocated, in one go) between *event* steps, where some request takes a checkpoint or fires its SWA
free: those run the full step's own decode half (``_check_decode_mem``, ``_decode_items``, ``complete_decode``).
Every step keeps each KV pool room for a page per request and the engine's slack after it, and an event step's
new checkpoint states are free, so no step evicts, refuses or retracts: the run stops before one that might.
A step that started a page or was an event step was a full step of the loop: the engine writes its row from the
pools after it, and the bounds see its batch (``FullStep``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.cache.components import MAMBA
from sim.cache.request import RequestCache
from sim.sched.batch import Batch, FullStep

if TYPE_CHECKING:
    from sim.sched.sglang_decode import SGLangDecode


def take_batch_run(sched: SGLangDecode, iteration: int, max_steps: int) -> tuple[int, list[FullStep]]:
    """Up to ``max_steps`` decode steps of the running batch from ``iteration`` on; returns how many were taken
    (fewer where a step might evict) and the full steps among them."""
    manager = sched.manager
    reqs = [manager.requests[state.request_id] for state in sched.running]
    in_flight = frozenset(req.request_id for req in reqs)  # each full step's is the step before's batch
    done, full_steps = 0, list[FullStep]()
    while done < max_steps:
        stretch = manager.batch_decode_steps(reqs, iteration + done, max_steps - done)
        if stretch:
            for offset, pages in manager.take_batch_decodes(reqs, stretch):
                full_steps.append(FullStep(done + offset, pages, None, None))
            done += stretch
            continue
        if not _event_step_fits(sched, reqs):
            break
        batch = _event_step(sched, iteration + done, in_flight)
        full_steps.append(FullStep(done, 0, batch, manager.usage()))
        done += 1
    for state in sched.running:
        state.decoded += done
    sched.clock.decode_steps_launched(len(full_steps))
    return done, full_steps


def _event_step_fits(sched: SGLangDecode, reqs: list[RequestCache]) -> bool:
    """Whether the next step, taken in full, evicts nothing: its pages leave room for a page per request and
    the slack, and its new checkpoint states are free (on pools apart: a byte budget weighs them with KV)."""
    manager, rules = sched.manager, sched.rules
    pages = 0
    for req in reqs:
        if req.commit_pending:
            return False
        pages += req.pages_needed(req.kv_len + 1)
    if manager.topology.kv_room(manager.has_swa) - rules.alloc_slack_pages - len(reqs) < pages:
        return False
    states = sum(1 for req in reqs if rules.decode_checkpoint(req) is not None and not req.spare_states)
    if not states:
        return True
    return manager.topology.name == "separate" and manager.pools[MAMBA].num_free >= states


def _event_step(sched: SGLangDecode, iteration: int, in_flight: frozenset[str]) -> Batch:
    """One decode step as the loop takes it with nothing to admit or process: the pass begins, the decode half
    plans every running request's step (its SWA free, pages and checkpoint), and the step completes."""
    manager = sched.manager
    manager.begin_pass(in_flight)
    if sched.mixed_chunk:  # PrefillAdder(num_mixed_decode_tokens=running_bs), as _launch reserves it
        sched.rules.reserve_mixed_decode(len(sched.running))
    if manager.has_swa:  # _prefill: hybrid SWA retries admission every pass
        sched.batch_is_full = False
    if not sched._check_decode_mem(sched.running):
        raise AssertionError("a batch run's event step found no room it was checked to have")
    batch = Batch(iteration)
    sched._decode_items(batch)
    for item in batch.items:
        manager.complete_decode(item.plan.request_id)
    return batch
