"""The timeouts that move the SimPy clock over a run of steps exactly as step-by-step timeouts would."""

from __future__ import annotations

import math


def event_delays(now: float, durations: list[float]) -> list[float]:
    """Timeouts that take the clock from ``now`` through steps of ``durations`` and end exactly where step
    after step would (each end is the previous end plus a duration, in floating point): one jump to the
    latest step end a single delay can land on exactly, then the remaining steps one by one. Usually
    that is one jump; ``end - now`` can miss by an ulp, and rounding can make an end unreachable."""
    ends, end = [], now
    for duration in durations:
        end = end + duration
        ends.append(end)
    for index in range(len(ends) - 1, 0, -1):
        delay = delay_landing_on(now, ends[index])
        if delay is not None:
            return [delay] + durations[index + 1 :]
    return list(durations)  # the first end is now + durations[0] by definition


def delay_landing_on(now: float, end: float) -> float | None:
    """A delay with ``now + delay == end`` exactly, or None where rounding skips ``end``."""
    delay = end - now
    for _ in range(4):
        if now + delay < end:
            delay = math.nextafter(delay, math.inf)
        elif now + delay > end:
            delay = math.nextafter(delay, -math.inf)
        else:
            return delay
    return delay if now + delay == end else None
