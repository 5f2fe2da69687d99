"""The default loop's batch runs through a last output: the step that gives a running request its last token,
which a batch run used to leave to the loop, taken at the end of the run as the loop's full step takes it.

Such a step, where the run was allowed (every running request in its prompt gets no chunk at any of its steps,
and nothing is admitted: nothing waits or the running requests are at their cap), is in the loop: a pass begun,
the decoding requests' steps planned and settled oldest first, the stalled chunks sized to nothing (which only
records why: ``_stall``), the step's time the decode run's, then ``postprocess`` completing each decode and
finishing, at once, each request given its last output, the row read after it. ``take_last_output_step`` does
these in this order (the stalled chunks' records as the run's other steps make them, after it); the engine
finishes the ended requests after the run's rows, as after the full step's row.

Where some listener reads step events (``StepStarted``, ``StepEnded``, ``PlainStepsEnded``), the run's are sent
after its steps, so the finishes would come before earlier steps' events: then the run stops short of the step,
as before, unless every listener is a batch reader (``EventBus.subscribe_batch_reader``: the bounds' recorder, which
reads a run's steps from their lengths, none of which the finishes move: ``READ_BATCHES_THROUGH_LAST``). Switch:
``THROUGH_LAST_OUTPUT``.
"""

from __future__ import annotations

from sim.cache.manager import CacheManager
from sim.sched import batch as batch_module
from sim.sched import loop_runs
from sim.sched.batch import FullStep
from sim.sched.loop_runs import batch_run_allowed, take_last_output_step, take_loop_run
from sim.sched.request import RequestState

# False: a batch run stops a step short of every last output, which the loop takes (the reference;
# tests/test_last_output_steps.py holds both equal)
THROUGH_LAST_OUTPUT = True
# True: so it does where only batch readers listen, its steps' batches read from their lengths (lengths batches need
# ``LAZY_DECODE_BATCH``, ``EVENT_BATCH_WHEN_READ`` and ``EVENT_BATCH_FROM_LENGTHS`` too); False: it stops short where anyone listens (the
# reference; tests/test_bounds_fast_paths_property.py holds both equal)
READ_BATCHES_THROUGH_LAST = True


def read_from_lengths() -> bool:
    """Whether a batch run's steps, the last output's too, are announced as lengths batches (``DecodeBatch``)."""
    return (
        READ_BATCHES_THROUGH_LAST
        and batch_module.LAZY_DECODE_BATCH
        and loop_runs.EVENT_BATCH_WHEN_READ
        and loop_runs.EVENT_BATCH_FROM_LENGTHS
    )


class LastOutputSteps:
    """Whether the default loop's batch runs may take a last output (none where the manager is not the radix
    one), and how many steps the run last allowed went through one (0: none)."""

    def __init__(self, manager: CacheManager | None):
        self.manager = manager
        self.steps = 0

    def allow(self, decoding: list[RequestState]) -> int:
        """``batch_run_allowed`` for the decoding requests, through the last output where ``through_last``."""
        assert self.manager is not None
        through = self.through_last()
        allowed = batch_run_allowed(self.manager, decoding, through)
        self.steps = allowed if through else 0
        return allowed

    def through_last(self) -> bool:
        """The switch on, and nobody listening to step events but batch readers (``READ_BATCHES_THROUGH_LAST``)."""
        if self.manager is None or not THROUGH_LAST_OUTPUT:
            return False
        events = self.manager.events
        if events.reads_step_events():
            return False
        return not events.reads_batches() or (read_from_lengths() and events.only_batch_readers())

    def take_run(
        self, runs: list[RequestState], iteration: int, num_steps: int, running: dict[str, RequestState]
    ) -> tuple[int, list[FullStep]]:
        """``num_steps`` steps of the batch run ``allow`` allowed (or fewer): where they reach the last output it
        allowed, the steps before it (``take_loop_run``) and, if all were taken, that step where it evicts nothing;
        the requests it ended leave ``running``. Returns the steps taken and the full steps among them."""
        manager = self.manager
        assert manager is not None
        last = num_steps == self.steps
        # no pass begun at its steps before the last: their decodes read none of its accounts, the next resets them
        done, full_steps = take_loop_run(
            manager, runs, iteration, num_steps - last, begins_pass=False, settles=True
        )
        step = (
            take_last_output_step(manager, runs, iteration + done, done)
            if last and done == num_steps - 1
            else None
        )
        if step is None:
            return done, full_steps
        for run in step.finished:
            del running[run.request_id]
        return done + 1, [*full_steps, step]
