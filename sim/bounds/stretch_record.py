"""The bounds' recorder reading a freeing stretch's page steps at once (``sim/sched/stretch_steps.py``): what
``EventRecorder._record_decode_step`` logs of each of its steps in turn, in step then batch order.

Nothing is looked up in a stretch, so a request's steps move only its own open run, and only a request whose
step logs an event (a produce that opens or closes a run) orders against the others. Where no two of the steps
are more than a page apart, a request's token moves at most a page from one step to the next: once its open run
holds its token's page (``first <= page < end``; or ``page == end`` at the first step, which extends it by that
page), every later step holds it or extends the run by one page, up to its last computed page, and logs nothing.
Such a request's steps are its run extended at once to its last step's page + 1 (at most its last computed page);
the others are read step by step, in step then batch order, each joining the first kind from the step where its
run holds its page. Steps further apart: every request step by step.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.sched.stretch_steps import StretchSteps


def record_stretch(
    steps: StretchSteps,
    page: int,
    runs: dict[str, list[int]],
    last_page: dict[str, int],
    produce: Callable[[str, int, int], None],
) -> None:
    """The stretch's steps logged: ``runs`` the open runs (request id -> [index, first, end page]), ``last_page``
    each request's computed pages (set for every request whose run is open), ``produce`` the recorder's."""
    tokens = steps.token_offsets()
    if not tokens:
        return
    at_once, first_token, last_token = close_steps(tokens, page), tokens[0], tokens[-1]
    pending: list[tuple[str, int]] = []
    for request_id, length in zip(steps.request_ids, steps.lengths, strict=True):
        run = runs.get(request_id)
        if at_once and run is not None and run[1] <= (length + first_token) // page <= run[2]:
            extend_run(run, (length + last_token) // page + 1, last_page[request_id])
        else:
            pending.append((request_id, length))
    for token in tokens:
        if not pending:
            return
        pending = _step(pending, token, last_token if at_once else -1, page, runs, last_page, produce)


def _step(
    pending: list[tuple[str, int]],
    token: int,
    last_token: int,
    page: int,
    runs: dict[str, list[int]],
    last_page: dict[str, int],
    produce: Callable[[str, int, int], None],
) -> list[tuple[str, int]]:
    """One step of the requests read step by step; returns those still to read so (``last_token`` < 0: all)."""
    left: list[tuple[str, int]] = []
    for request_id, length in pending:
        first = (length + token) // page
        run = runs.get(request_id)
        if run is None or not run[1] <= first < run[2]:
            produce(request_id, first, first + 1)
            run = runs.get(request_id)
        if last_token >= 0 and run is not None and run[1] <= first < run[2]:
            extend_run(run, (length + last_token) // page + 1, last_page[request_id])
        else:
            left.append((request_id, length))
    return left


def extend_run(run: list[int], end: int, last: int) -> None:
    """The open run extended to page ``end``, at most the request's last computed page ``last``."""
    if end > last:
        end = last
    if end > run[2]:
        run[2] = end


def close_steps(tokens: list[int], page: int) -> bool:
    """Whether no two consecutive steps are more than a page apart."""
    before = tokens[0]
    for token in tokens:
        if token - before > page:
            return False
        before = token
    return True
