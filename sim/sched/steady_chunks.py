"""The default loop's side of vLLM+'s steady page chunks (``marconi_vllm_steady.py``): the step's hold opened
and asked once whether its chunks may be planned in one call, a chunk added to the batch from that call, and
the rules a step's commits go to in one call. None of these names the scheduler back: it passes what they
read."""

from __future__ import annotations

from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.marconi_vllm_steady import plan_steady, steady_applies
from sim.cache.engines.marconi_vllm_step import StepHold, open_step
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.sched.batch import Batch, BatchItem
from sim.sched.capped_stalls import CappedStalls
from sim.sched.request import RequestState

StepOf = tuple[StepHold, MarconiRules] | None  # vLLM+'s step hold and its rules (``DefaultScheduler._step``)
Steady = (
    tuple[CacheManager, MarconiRules] | None
)  # the radix manager and vLLM+'s rules, where a step's chunks fuse


def step_of(manager: CacheManager | None) -> StepOf:
    """The radix manager's rules' step hold and the rules, where they keep one (vLLM+'s); else None."""
    rules = manager.rules if manager is not None else None
    hold = getattr(rules, "step", None)
    return (hold, rules) if isinstance(hold, StepHold) else None  # type: ignore[return-value]


def open_steady(step: StepOf, manager: CacheManager | None) -> Steady:
    """Before a step's prompt chunks: the hold opened (``open_step``); the manager and the rules where each
    page chunk may be planned by ``plan_steady`` this step (``steady_applies``), else None."""
    if step is None or manager is None:
        return None
    hold, rules = step
    open_step(hold, rules, manager)
    return (manager, rules) if steady_applies(manager, rules) else None


def add_steady(
    steady: tuple[CacheManager, MarconiRules],
    capped: CappedStalls,
    batch: Batch,
    run: RequestState,
    budget: int,
) -> int | None:
    """``_add_prefill(batch, run, budget)`` where the request's chunk is not held by the capped memo and
    ``plan_steady`` plans it: the budget it leaves (a refusal recorded as ``_add_prefill`` records it); None,
    nothing changed, where ``_add_prefill`` decides."""
    if capped.holds(run.request_id):
        return None
    manager, rules = steady
    plan = plan_steady(manager, rules, manager.requests[run.request_id], budget)
    if plan is None:
        return None
    if isinstance(plan, Refusal):
        run.last_refusal = str(plan)
        return budget
    batch.items.append(BatchItem(plan, True, run.copy_state_from))
    run.copy_state_from = None
    return budget - (plan.end - plan.start)


def commit_rules(manager: CacheManager | None, step: StepOf) -> Steady:
    """The manager and the rules a step's prompt chunks are committed to by ``commit_steady``, where its open
    found them steady (``steady_applies``, kept on the hold); else None."""
    if step is None or manager is None or not step[0].steady:
        return None
    return (manager, step[1])
