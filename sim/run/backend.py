"""Backends: what the engine calls to run one scheduled batch and learn how long it took.

The default backend only predicts (the cost model); the executor's backend runs the batch for real
and measures it. Both see the same ``Batch``, so predicted and measured runs make identical cache
decisions step by step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sim.cache.events import EventBus, StepStarted
from sim.cache.interface import CacheModel
from sim.compiled_core import mypyc_attr
from sim.cost import CostModel, StepShape
from sim.cost.decode_run import steps_before
from sim.cost.decode_run_settled import StepTimes
from sim.sched.batch import Batch


class Backend(Protocol):
    """Everything the engine and ``run_timed`` ask of a backend."""

    # True: step times come from the cost model alone, so the engine may take a run of plain decode steps in
    # one event (the fast path, ``decode_times``); False: every step must go through ``run``
    @property
    def predicts_only(self) -> bool: ...

    def attach(self, manager: CacheModel) -> None:
        """Called once, before the first step: a backend with memory of its own mirrors the manager's
        pools."""

    def run(self, batch: Batch, manager: CacheModel) -> float:
        """Run (or predict) the batch; returns the step's duration in seconds."""

    def decode_times(self, contexts: tuple[int, ...]) -> Iterable[float]:
        """Durations of consecutive decode-only steps of requests at these context lengths, each one token
        longer than the last (asked only of a backend that ``predicts_only``)."""

    def decode_run(
        self, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int
    ) -> tuple[list[float], list[float]]:
        """The starts and durations of those steps, from ``now``, that end before ``horizon``, at most
        ``max_steps``: ``steps_before(decode_times(contexts), ...)`` (``sim/cost/decode_run.py``)."""


def batch_shape(batch: Batch) -> StepShape:
    prefill = tuple(
        (item.plan.start, item.plan.end - item.plan.start) for item in batch.items if item.is_prefill
    )
    decode = tuple(item.plan.start for item in batch.items if not item.is_prefill)
    return StepShape.trusted(prefill, decode)


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled, yet tests subclass it
class PredictBackend:
    predicts_only = True

    def __init__(self, cost: CostModel):
        self.cost = cost

    def attach(self, manager: CacheModel) -> None:
        pass  # no memory of its own

    def run(self, batch: Batch, manager: CacheModel) -> float:
        return self.step_time(batch_shape(batch))

    def step_time(self, shape: StepShape) -> float:
        return self.cost.step_time(shape)

    def decode_times(self, contexts: tuple[int, ...]):
        return self.cost.decode_times(contexts)

    def decode_run(self, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int):
        return self.cost.decode_run(contexts, now, horizon, max_steps)


@mypyc_attr(allow_interpreted_subclasses=True)
class FixedStepBackend:
    """Every step takes the same time: exact, hand-checkable simulated times in tests and examples."""

    predicts_only = True

    def __init__(self, step_s: float, per_token_s: float = 0.0):
        self.step_s, self.per_token_s = step_s, per_token_s

    def attach(self, manager: CacheModel) -> None:
        pass  # no memory of its own

    def run(self, batch: Batch, manager: CacheModel) -> float:
        return self.step_time(batch_shape(batch))

    def step_time(self, shape: StepShape) -> float:
        return self.step_s + self.per_token_s * shape.num_tokens

    def decode_times(self, contexts: tuple[int, ...]):
        while True:
            yield self.step_time(StepShape.trusted((), contexts))

    def decode_run(self, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int):
        return steps_before(self.decode_times(contexts), now, horizon, max_steps)


# True: a run whose only step listeners are batch readers (the bounds' recorder: a ``StepStarted``'s batch, no
# float of the clock) takes ``run_for_log``'s arrays too, so the default run, bounds on, gets them; False: any
# ``StepStarted`` handler keeps the lists (the reference; tests/test_run_arrays_property.py)
ARRAYS_FOR_BATCH_READERS = True


def step_floats_read(events: EventBus, step_ended: list, plain_ended: list) -> bool:
    """Whether a listener may read a decode run's starts and durations as the clock's floats: a ``StepEnded`` or
    ``PlainStepsEnded`` handler (its event carries them), or a ``StepStarted`` handler that is not a batch reader
    (it may read what it likes); then the run keeps its lists (``decode_run_settled.ARRAY_RUNS``)."""
    if step_ended or plain_ended:
        return True
    if not ARRAYS_FOR_BATCH_READERS:
        return bool(events.channel(StepStarted))
    return not events.only_batch_readers()


def run_for_log(
    backend: Backend, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int
) -> tuple[StepTimes, StepTimes]:
    """``backend.decode_run`` for a run only the engine's step log reads: from the simulator's own roofline
    backend a long run's figures may be float64 arrays (``decode_run_settled.ARRAY_RUNS``); a subclass's own."""
    if type(backend) is PredictBackend:
        return backend.cost.decode_run(contexts, now, horizon, max_steps, as_arrays=True)
    return backend.decode_run(contexts, now, horizon, max_steps)


def reads_page_ids(backend: Backend) -> bool:
    """Whether ``backend`` may read a page id of the runs it steps. The simulator's own two read only each
    batch's shape (``batch_shape``: its items' starts and lengths), never the manager; any other (the
    executor's mirrors the pools' ids, a subclass may read what it likes) is taken to read them."""
    return type(backend) not in (PredictBackend, FixedStepBackend)
