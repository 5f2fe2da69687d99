"""A step log fed the full rows and decode runs its property tests draw (tests/test_step_blocks.py,
tests/test_step_rows_lean.py): one feeding, so both files compare logs made the same way."""

from __future__ import annotations

from typing import Callable

from sim.run.step_log import StepLog

POOLS = (7,) * 9


def fed_log(log: StepLog, feeds: list, as_row: Callable[[tuple], tuple] = tuple) -> StepLog:
    """``log`` after a full step's row (a run follows one: it reads the pools), then ``feeds``: ``("row", args)``
    appends ``as_row(args)``, a step's six values; ``("run", (first_step, num_steps, num_decode))`` a run of
    decode steps half a second each."""
    log.append((0, 0.0, 0.25, 1, 100, 0), POOLS)
    for kind, args in feeds:
        if kind == "row":
            log.append(as_row(args), POOLS)
        else:
            first, count, num_decode = args
            starts = [first * 1e-6 + offset * 0.5 for offset in range(count)]
            log.extend_decode_only(first, starts, [0.5] * count, num_decode)
    return log
