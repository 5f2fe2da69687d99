"""The step table's pool columns kept as what changes them, made row by row only when the table is made.

A timed run's pools change at few of its steps: a full step's row reads the pools after it (a *mark*: every
column's value from that row on), a batch run starts from the pools before it (a mark at its first row) and
moves pages from free to running in each KV pool at its page-starting steps (a *move*: ``count`` rows from
``row`` on, ``pages`` each) or reads the pools after an event step (a mark), and plain decode steps change
nothing. So each row's value is the last mark at or before it (the later one where two share a row: a batch
run's event step at its first row) plus the pages moved from that mark's row through the row: an integer
forward fill and two running sums, made with numpy for the whole table at once. Per batch run that is a mark
and a move per page-starting stretch instead of nine column blocks (``step_log.run_pool_columns``, the
row-by-row reference, ``tests/test_pool_marks.py``).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from sim.run.metrics import POOL_COLUMNS

_NUM_POOL_COLUMNS = len(POOL_COLUMNS)
# True: a column every mark leaves at 0 (a pool the model has not: SWA and Mamba under `radix`) is ``np.zeros``,
# memory the system maps only when it is read or moved into, and the others are taken from the marks; False: every
# column taken, 0 written row by row (the reference: tests/test_pool_marks.py)
ZERO_COLUMNS_UNWRITTEN = True


class PoolMarks:
    def __init__(self) -> None:
        self.mark_rows = array("q")
        self.mark_values = array("q")  # a mark's columns in POOL_COLUMNS order, one mark after another
        self.move_rows = array("q")
        self.move_counts = array("q")
        self.move_pages = array("q")
        self.move_free = array("q")  # the KV pool's free column (its running column is the next)

    def mark(self, row: int, pools: Sequence[int]) -> None:
        """The pools read ``pools`` at ``row`` and after, until the next mark (pages moved since included)."""
        self.mark_rows.append(row)
        self.mark_values.extend(pools)

    def move(self, row: int, count: int, pages: int, kv_columns: tuple[int, ...]) -> None:
        """Rows ``row`` to ``row + count - 1`` each move ``pages`` pages from free to running in each KV pool
        (``kv_columns``: each one's free column)."""
        for free in kv_columns:
            self.move_rows.append(row)
            self.move_counts.append(count)
            self.move_pages.append(pages)
            self.move_free.append(free)

    def columns(self, num_rows: int) -> list[np.ndarray]:
        """Each pool column's value at each of the table's ``num_rows`` rows (int64)."""
        if not num_rows:
            return [np.zeros(0, dtype=np.int64) for _ in POOL_COLUMNS]
        mark_rows = np.frombuffer(self.mark_rows, dtype=np.int64)
        values = np.frombuffer(self.mark_values, dtype=np.int64).reshape(-1, _NUM_POOL_COLUMNS)
        if not len(mark_rows) or mark_rows[0] > 0:
            raise ValueError("the step table's first row has no pools")
        # each row's mark: the last at or before it (marks come in row order; one sharing a later mark's row
        # covers no row), as a repeat of each mark over its rows, not a search per row: fewer new arrays
        mark_spans = np.diff(mark_rows, append=num_rows)
        which = np.repeat(np.arange(len(mark_rows)), mark_spans)
        # every column at once: each a row of one take (contiguous), rather than a strided take per column
        if ZERO_COLUMNS_UNWRITTEN:
            columns = self._taken_or_zero(values, which, num_rows)
        else:
            columns = list(np.ascontiguousarray(values.T)[:, which])
        if len(self.move_rows):
            del which  # the rows' marks' rows instead: one array of the table's length at a time
            self._add_moves(columns, np.repeat(mark_rows, mark_spans), num_rows)
        return columns

    def _taken_or_zero(self, values: np.ndarray, which: np.ndarray, num_rows: int) -> list[np.ndarray]:
        """Each column's rows: zeros where every mark is 0 (the moves, if any, add to them in place), else taken
        from the marks (those in one take, a row of it each)."""
        zero = [not values[:, c].any() for c in range(_NUM_POOL_COLUMNS)]
        kept = [c for c in range(_NUM_POOL_COLUMNS) if not zero[c]]
        taken = iter(np.ascontiguousarray(values.T[kept])[:, which]) if kept else iter(())
        return [
            np.zeros(num_rows, dtype=np.int64) if zero[c] else next(taken) for c in range(_NUM_POOL_COLUMNS)
        ]

    def _add_moves(self, columns: list[np.ndarray], marked_at: np.ndarray, num_rows: int) -> None:
        """Each KV pool's pages moved from its row's mark's row through the row, from free to running."""
        move_rows = np.frombuffer(self.move_rows, dtype=np.int64)
        move_ends = move_rows + np.frombuffer(self.move_counts, dtype=np.int64)
        pages = np.frombuffer(self.move_pages, dtype=np.int64)
        move_free = np.frombuffer(self.move_free, dtype=np.int64)
        for free in np.unique(move_free).tolist():
            chosen = move_free == free
            per_row = np.zeros(num_rows + 1, dtype=np.int64)  # pages each row moves, as differences
            np.add.at(per_row, move_rows[chosen], pages[chosen])
            np.add.at(per_row, move_ends[chosen], -pages[chosen])
            moved = np.zeros(num_rows + 1, dtype=np.int64)  # moved[r + 1]: pages rows 0..r moved
            steps = per_row[:num_rows]  # each row's pages, made in place (new arrays cost page faults)
            np.cumsum(steps, out=steps)
            np.cumsum(steps, out=moved[1:])
            since_mark = np.subtract(moved[1:], moved[marked_at], out=steps)
            columns[free] -= since_mark
            columns[free + 1] += since_mark
