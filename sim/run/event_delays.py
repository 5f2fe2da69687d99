"""The timeouts that move the SimPy clock over a run of steps exactly as step-by-step timeouts would."""

from __future__ import annotations

import math

from sim.cost.decode_run_settled import StepTimes

# True: where the caller gives the last step's start (a decode run's ``starts[-1]``: the clock's running sum, each
# start the previous start plus its duration, from ``now``), the jump to the last end is tried first from it,
# without summing the run again; False: the ends summed every time (the reference;
# tests/test_event_delays_last_start.py holds both equal)
DELAYS_FROM_LAST_START = True


def event_delays(now: float, durations: StepTimes, last_start: float | None = None) -> list[float]:
    """Timeouts that take the clock from ``now`` through steps of ``durations`` and end exactly where step
    after step would (each end is the previous end plus a duration, in floating point): one jump to the
    latest step end a single delay can land on exactly, then the remaining steps one by one. Usually
    that is one jump; ``end - now`` can miss by an ulp, and rounding can make an end unreachable.
    ``last_start``: the last step's start as the steps' running sum from ``now`` makes it, where known: the
    last end is then ``last_start`` plus the last duration, the same addition the sum ends with. ``durations``
    may be a float64 array (``decode_run_settled.ARRAY_RUNS``): the same floats."""
    if DELAYS_FROM_LAST_START and last_start is not None and len(durations) > 1:
        delay = delay_landing_on(now, last_start + float(durations[-1]))
        if delay is not None:
            return [delay]
    steps: list[float] = (
        durations if isinstance(durations, list) else durations.tolist()
    )  # the clock's floats
    ends, end = [], now
    for duration in steps:
        end = end + duration
        ends.append(end)
    for index in range(len(ends) - 1, 0, -1):
        delay = delay_landing_on(now, ends[index])
        if delay is not None:
            return [delay] + steps[index + 1 :]
    return list(steps)  # the first end is now + durations[0] by definition


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
