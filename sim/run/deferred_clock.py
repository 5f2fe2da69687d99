"""A full step's timeout deferred while nothing reads the clock: the engine loop's steps moved over in one jump.

``Engine._loop`` yields one SimPy timeout per full step (``marconi-vllm``'s timed run: ~138k of them at 1,000
requests, each a ``Timeout``, a queue push and pop and a generator resume). Between a step's start and the next
step's start nothing reads the clock unless the step gave a first token, ended a request, gave up on one, found
nothing to schedule, or is followed by a decode run; and nothing else runs before the next queued event.
So where a step ends before that event, its timeout is kept pending instead (``defers``): the row takes the start
the clock would have had (``now``), and the pending steps are moved over (``catch_up``: ``event_delays``' jump,
landing exactly where step after step would) before anything reads the clock, schedules an event or waits.

Why equal: every time read is the one step by step gives (the running sum from the last synced time, the same
float additions the timeouts make); no event fires inside the skipped span (each deferred step ends strictly
before the earliest queued event, and none is queued while steps are pending: only this loop could queue one,
and it catches up first); so the other processes' events run at the same times in the same order (their
queue order among equal times is their scheduling order, which the skipped timeouts never came between).
Switch: ``DEFER_STEP_TIMEOUTS`` (False: a timeout per step, the reference; tests/test_deferred_clock_property.py).
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from sim.run.event_delays import event_delays

# False: every full step yields its own timeout (the reference)
DEFER_STEP_TIMEOUTS = True


class DeferredClock:
    """The loop's clock with the full steps taken since it last moved (``pending_durations``)."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.pending_durations: list[float] = []
        self._last_start_at = 0.0  # the last pending step's start, as the running sum from ``env.now``
        self._end_at = 0.0  # the last pending step's end

    def now(self) -> float:
        """The time step after step would have reached: the last pending step's end, else the clock's."""
        return self._end_at if self.pending_durations else self.env.now

    def defers(self, started_at: float, duration: float) -> bool:
        """Whether a step from ``started_at`` (``now()``) of ``duration`` is kept pending: the switch on and its
        end strictly before the earliest queued event (at a tie that event would run first)."""
        end_at = started_at + duration
        if not DEFER_STEP_TIMEOUTS or end_at >= self.env.peek():
            return False
        self.pending_durations.append(duration)
        self._last_start_at, self._end_at = started_at, end_at
        return True

    def catch_up(self) -> Generator[simpy.Event, object, None]:
        """Move the clock over the pending steps, landing exactly on the last one's end."""
        if not self.pending_durations:
            return
        durations, end_at = self.pending_durations, self._end_at
        self.pending_durations = []
        for delay in event_delays(self.env.now, durations, self._last_start_at):
            yield self.env.timeout(delay)
        assert self.env.now == end_at, "the deferred steps landed where step after step would"
