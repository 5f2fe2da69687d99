"""A batch run's quiet stretch cut where the SGLang loop's full steps would first evict (``exact`` stretches of
``PlainDecodes.batch_decode_stretch``; ``sim/sched/sglang_room.py`` says why that room is the full step's).

A step from ``free`` free pages, with ``before`` pages started by the stretch's steps before it and ``pages``
its own, evicts nothing where ``free - before >= n`` (a page per request) and ``free - before - pages >=
slack``; a step that starts no page needs only the first. The reference cut (``fitting_starts``) keeps the
page per request and the slack past every step's pages, ``free - before - pages >= n + slack``.
"""

from __future__ import annotations


def room_fitting_starts(
    starts: list[tuple[int, int]], steps: int, before_cap: int, through_cap: int
) -> tuple[int, list[tuple[int, int]]]:
    """Of a stretch of ``steps`` steps and its page starts (sorted ``(offset, index)``), the steps before the
    first that does not fit, with their starts: a step fits where the pages started before it are at most
    ``before_cap`` (``free - n``) and with its own at most ``through_cap`` (``free - slack``)."""
    taken, num_starts = 0, len(starts)
    while taken < num_starts:
        offset, end = starts[taken][0], taken
        while end < num_starts and starts[end][0] == offset:
            end += 1
        if taken > before_cap:  # every step after the last one taken is short of a page per request
            return starts[taken - 1][0] + 1, starts[:taken]
        if end > through_cap:  # this step's own pages leave less than the slack
            return offset, starts[:taken]
        taken = end
    if num_starts > before_cap:
        return min(steps, starts[-1][0] + 1), starts
    return steps, starts


def lockstep_fitting_steps(steps: int, free: int, num_reqs: int, slack: int) -> int:
    """The steps of a lockstep stretch (a page per request at every step) that fit: step ``s`` has
    ``free - s * n`` free, which must hold ``n`` pages and ``n + slack``."""
    return min(steps, (free - slack) // num_reqs)
