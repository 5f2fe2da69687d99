"""A batch run's full steps told to the bounds' recorder in one ``StepStarted`` instead of one a step.

A timed run with bounds announces each full step of a batch run that carries a batch (at page 1 or in a freeing
stretch, most of the run's steps: ~25,000 of ``no-cache``'s at 4,000 requests) as its own ``StepStarted``: an
event made, emitted and dispatched a step. Where nothing listens to the run's step events (``StepEnded``,
``PlainStepsEnded``: nothing can come between two of those ``StepStarted``) and every ``StepStarted`` handler is a
batch reader, which reads a ``RunSteps`` batch as the steps' own events in order, the engine tells the run's full
steps in one event (``Engine._announce_batch_run``).
"""

from __future__ import annotations

from typing import NamedTuple

from sim.cache.events import EventBus

# True: a batch run's full steps told in one ``StepStarted`` whose batch is ``RunSteps`` where only batch readers
# listen; False: a ``StepStarted`` per full step with a batch (the reference; tests/test_run_steps_property.py holds
# both equal)
WHOLE_RUNS = True


class RunSteps(NamedTuple):
    """A ``StepStarted``'s batch that stands for a batch run's full steps: each one with a batch is read as its own
    ``StepStarted`` (that batch, ``num_steps`` its), in their order."""

    full_steps: list


def told_whole(events: EventBus) -> bool:
    """Whether a batch run's full steps are told in one event (``WHOLE_RUNS``): a batch reader alone listens."""
    return WHOLE_RUNS and not events.reads_step_events() and events.only_batch_readers()
