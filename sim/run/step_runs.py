"""A stretch of full steps taken in the engine loop's own frame: where a step ends strictly before the next
scheduled event, the loop moves the SimPy clock to the step's end itself and goes on with the step's
postprocess and the next step, with no timeout event a step.

In ``marconi-vllm``'s timed runs most full steps are prefill steps (a page chunk for each prefilling request
beside the decodes), 137,876 at 1,000 requests, of which 137,838 end before the next arrival or follow-up: each
step made, scheduled and popped a SimPy timeout and resumed the loop's generator only to land the clock where its
own addition puts it. Nothing else can run in between (no event is due before the end), so the loop goes on
exactly as it would once woken: the same clock (the same float addition SimPy's ``schedule`` makes), the same
stamps, rows and finishes, and a follow-up's process scheduled at the same time. A tie with a due event is left
to the timeout (the earlier-scheduled event runs first), as is a NaN end. Each such step is also priced from a
shape made in one pass over its items, which gives its row's counts too (``priced``).
"""

from __future__ import annotations

import simpy

from sim.cache.interface import CacheModel
from sim.cost import StepShape
from sim.run.backend import Backend, PredictBackend
from sim.sched.batch import Batch

# True: a full step that ends strictly before the next scheduled event moves the clock itself and the loop goes
# on in its frame; False: a timeout every step (the reference; tests/test_step_runs_property.py holds both equal)
IN_LOOP_FRAME = True
# True: the roofline backend prices a full step from the shape made in one pass over its items, which also gives the
# step row's counts; False: ``backend.run`` makes the shape and the row counts the items again (the reference)
SHAPE_ONCE = True


def clock_moved(env: simpy.Environment, duration: float) -> bool:
    """Move ``env``'s clock over a step of ``duration`` where it ends before every scheduled event (the clock
    lands where ``timeout(duration)`` would: ``now + duration``); False, the clock unmoved: the caller yields."""
    if not IN_LOOP_FRAME:
        return False
    end = env._now + duration
    if not end < env.peek():  # a tie lets the earlier-scheduled event run first; NaN is never before
        return False
    env._now = end
    return True


def priced(backend: Backend, batch: Batch, manager: CacheModel) -> tuple[float, tuple[int, int, int] | None]:
    """The step's duration, and where the simulator's own roofline backend prices it, the row's counts (its
    prefill chunks, their tokens, its decodes) from the one pass that makes the step's shape; None: the row counts
    the batch itself (``batch_counts``). ``PredictBackend.run`` is ``step_time(batch_shape(batch))``: the same
    shape, its tuples in the items' order."""
    if not SHAPE_ONCE or type(backend) is not PredictBackend:
        return backend.run(batch, manager), None
    prefill: list[tuple[int, int]] = []
    decode: list[int] = []
    tokens = 0
    for item in batch.items:
        plan = item.plan
        if item.is_prefill:
            length = plan.end - plan.start
            prefill.append((plan.start, length))
            tokens += length
        else:
            decode.append(plan.start)
    shape = StepShape.trusted(tuple(prefill), tuple(decode))
    return backend.step_time(shape), (len(prefill), tokens, len(decode))


def batch_counts(batch: Batch) -> tuple[int, int, int]:
    """A step row's counts: its prefill chunks, their tokens and its decodes (``batch_shape``'s, without it)."""
    num_prefill = prefill_tokens = num_decode = 0
    for item in batch.items:
        if item.is_prefill:
            num_prefill += 1
            prefill_tokens += item.plan.end - item.plan.start
        else:
            num_decode += 1
    return num_prefill, prefill_tokens, num_decode
