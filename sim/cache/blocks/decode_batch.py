"""A timed run's steady decode steps of every running request taken in one loop, block boundaries included
(``take_decode_batch``; the engine's batch run of ``VllmScheduler``, switch ``sim.sched.vllm_runs.BATCH_RUNS``).

The timed loop takes a step where any running request frees, allocates or hashes a block in full: the
scheduler's walk, each request's ``prepare_decode`` (``steady_step`` -> ``take_boundary_step``), the settles that
hash nothing more, the step's row. Where every request decodes steadily, the steps that do anything are known
before the run (each request's busy ends, ``busy_step_ends``); this loop visits only those, each request's
``take_boundary_step`` in the running order within a step, as ``_launch`` makes them, and every other step only
lengthens the requests. A step is taken only where every request's part is of the steady shape and the free
queue holds every block it allocates before any of its frees (``steady_need``); the run stops untouched before
the first that is not, and the loop takes that step in full (a refusal, a preemption).
"""

from __future__ import annotations

from sim.cache.blocks.manager import BlockCacheManager
from sim.cache.blocks.request import BlockRequest
from sim.cache.components import Component
from sim.cache.pools import PoolUsage


def take_decode_batch(
    manager: BlockCacheManager, reqs: list[BlockRequest], iteration: int, num_steps: int
) -> tuple[int, list[tuple[int, dict[Component, PoolUsage]]]]:
    """Up to ``num_steps`` decode steps of ``reqs`` (in running order) from ``iteration`` on, exactly as the
    loop's steps: the steps taken, and each step that did anything by its offset, with the pools after it."""
    lag = manager.batches_in_flight
    if not steady_batch(manager, reqs, iteration, lag):
        return 0, []
    busy: dict[int, list[tuple[BlockRequest, int]]] = {}  # the steps that do anything, by offset
    for req in reqs:
        start = req.kv_len
        for end in manager.busy_step_ends(start, start + num_steps, lag):
            busy.setdefault(end - start - 1, []).append((req, end))
    taken, steps = num_steps, []
    for offset in sorted(busy):
        step = busy[offset]
        needs = [manager.steady_need(req, end, lag) for req, end in step]
        if min(needs) < 0 or sum(needs) > manager.pool.num_free:  # frees come first: room without them
            taken = offset
            break
        manager.begin_pass()
        for req, end in step:
            manager.take_boundary_step(req, end, lag)
        steps.append((offset, manager.usage()))
    if taken:
        for req in reqs:
            req.take_steady_decodes(iteration + taken - 1, taken)
    return taken, steps


def steady_batch(manager: BlockCacheManager, reqs: list[BlockRequest], iteration: int, lag: int) -> bool:
    """Whether every request decodes steadily from ``iteration`` on, through ``steady_step``'s path."""
    if not manager.steady_steps or not manager.takes_steady_steps():
        return False
    return all(req.decodes_steadily(iteration, lag) for req in reqs)
