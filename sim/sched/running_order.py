"""The default loop's running requests in admission order, without sorting them at every step.

``DefaultScheduler.running`` is a dict, and a dict keeps its keys in insertion order. A request enters it only
at its admission (``_admit_head``), right after it takes the next ``admission_order`` from the scheduler's
counter, and leaves it only by a deletion (a retraction, a finish, a batch run's last output), which keeps the
others' order; a request admitted again takes a new, larger number and goes in at the end. So the dict's order
is the ascending order of ``admission_order``: its values are already what ``sorted(..., key=admission_order_of)`` returns
(the numbers are distinct, so the sort has no ties to break), and its last value is the newest request.
"""

from __future__ import annotations

from sim.sched.request import RequestState

# False: every step sorts the running requests by admission_order (the reference; tests/test_running_order.py
# holds both equal)
IN_ADMISSION_ORDER = True


def admission_order_of(state: RequestState) -> int:
    return state.admission_order


def oldest_first(running: dict[str, RequestState]) -> list[RequestState]:
    """The running requests, oldest admission first (a list: the caller may retract while walking it)."""
    if IN_ADMISSION_ORDER:
        return list(running.values())
    return sorted(running.values(), key=admission_order_of)


def newest_of(running: dict[str, RequestState]) -> RequestState | None:
    """The running request admitted last, or None when nothing runs."""
    if IN_ADMISSION_ORDER:
        return next(reversed(running.values()), None)
    return max(running.values(), key=admission_order_of, default=None)
