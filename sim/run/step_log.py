"""The per-step tables of a run, kept as columns: a long timed run has about a million steps, a replay of a
million-request trace a million rows."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sim.cost.decode_run_settled import StepTimes
from sim.run.metrics import POOL_COLUMNS, pool_values
from sim.run.pool_marks import PoolMarks
from sim.run.step_blocks import StepBlocks

STEP_COLUMNS = ("step", "start_at", "duration_s", "num_prefill", "prefill_tokens", "num_decode")
TIME_COLUMNS = ("start_at", "duration_s")  # as the clock gives them (the same floats: ``TIMES_AS_DOUBLES``)
INT_COLUMNS = ("num_prefill", "prefill_tokens", "num_decode")  # after ``step``, in a row's order
# False: a run's step numbers appended one Python int at a time (the reference); True: as one int64 block, the
# same numbers (tests/test_step_rows_lean.py holds both equal)
STEP_NUMBERS_IN_BULK = True
# True: the integer columns kept as blocks (a full step's row, a run of decode steps), made into rows only by
# ``frame`` (``sim/run/step_blocks.py``); False: written row by row into ``columns`` (the reference;
# tests/test_step_blocks.py holds both equal). Read when a log is made: one log keeps one way throughout
INT_COLUMNS_AS_BLOCKS = True
# True: the table holds the arrays ``frame`` made (each column its own block) where all are new, as the blocks'
# are; False: pandas copies them into one block a dtype (the reference). The copy is the table again in fresh
# memory: at 4,000 requests of no-cache (~600,000 rows) most of ``frame``'s time was the system's, faulting in new
# pages (tests/test_step_blocks.py holds both equal)
FRAME_UNCOPIED = True
# True: the time columns kept as machine doubles (``array('d')``: the same floats, 8 bytes each rather than a list's
# pointer to a 24-byte float that lives until the table is made); False: lists of the clock's floats (the
# reference; tests/test_step_blocks.py holds both equal). Read when a log is made
TIMES_AS_DOUBLES = True


class StepLog:
    """The timed engine's step table, a row per step, written by the engine (``sim/run/engine.py``): a full
    step's row, a run of plain decode steps, or a batch run's rows as column blocks. The integer columns are
    machine integers (``array('q')``: a Python int in a list costs 36 bytes, and numpy reads the array without
    converting each); the times stay the floats the clock made. The pool columns are kept as what changed them
    (``PoolMarks``), and the integer columns as blocks of rows (``StepBlocks``), made row by row only by
    ``frame``."""

    def __init__(self) -> None:
        self._starts: list[float] | array = array("d") if TIMES_AS_DOUBLES else []
        self._durations: list[float] | array = array("d") if TIMES_AS_DOUBLES else []
        times = {"start_at": self._starts, "duration_s": self._durations}
        self.columns: dict[str, list | array] = {
            name: times[name] if name in TIME_COLUMNS else array("q") for name in STEP_COLUMNS
        }
        self._row_columns = list(self.columns.values())  # in a row's order
        self.pools = PoolMarks()
        self.blocks = StepBlocks() if INT_COLUMNS_AS_BLOCKS else None  # None: the integer columns row by row

    def append(self, step: tuple, pools: tuple) -> None:
        self.pools.mark(len(self._starts), pools)
        if self.blocks is not None:
            number, start_at, duration, num_prefill, prefill_tokens, num_decode = step
            self._starts.append(start_at)
            self._durations.append(duration)
            self.blocks.add(number, 1, num_prefill, prefill_tokens, num_decode)
            return
        for column, value in zip(self._row_columns, step, strict=True):
            column.append(value)

    def extend_decode_only(
        self, first_step: int, starts: StepTimes, durations: StepTimes, num_decode: int
    ) -> None:
        """Steps that only decoded and allocated nothing: the pools read as after the step before."""
        self._extend_decodes(first_step, starts, durations, num_decode)

    def extend_batch_run(
        self,
        first_step: int,
        starts: StepTimes,
        durations: StepTimes,
        num_decode: int,
        pools: Sequence[int],
        full_steps: Sequence,
        kv_columns: tuple[int, ...],
    ) -> None:
        """A batch run's decode steps (``Engine._record_batch_run``) from the pools before it: each full step
        (``FullStep``) that started pages moved them from free to running in each KV pool (``kv_columns``: each
        one's free column, its running column next), an event step reads as its ``usage``, any other step as
        the step before (``run_pool_columns``, row by row)."""
        row = len(self)
        self._extend_decodes(first_step, starts, durations, num_decode)
        self.pools.mark(row, pools)
        for full in full_steps:
            if full.usage is not None:
                self.pools.mark(row + full.offset, pool_values(full.usage))
            elif full.pages:
                self.pools.move(row + full.offset, full.num_steps, full.pages, kv_columns)
            if full.swa_freed:  # SWA pages back from running to free (a freeing stretch's step)
                self.pools.move(row + full.offset, 1, -full.swa_freed, kv_columns[1:])

    def _extend_decodes(self, first_step: int, starts: StepTimes, durations: StepTimes, num_decode: int):
        if self.blocks is not None:
            _extend_times(self._starts, starts)
            _extend_times(self._durations, durations)
            self.blocks.add(first_step, len(starts), 0, 0, num_decode)
            return
        count, columns = len(starts), self.columns
        step_numbers = columns["step"]
        assert isinstance(step_numbers, array)
        if STEP_NUMBERS_IN_BULK:
            step_numbers.frombytes(np.arange(first_step, first_step + count, dtype=np.int64).tobytes())
        else:
            step_numbers.extend(range(first_step, first_step + count))
        _extend_times(columns["start_at"], starts)
        _extend_times(columns["duration_s"], durations)
        for name, value in (("num_prefill", 0), ("prefill_tokens", 0), ("num_decode", num_decode)):
            columns[name].extend(array("q", (value,)) * count)

    def __len__(self) -> int:
        return len(self._starts)

    def frame(self) -> pd.DataFrame:
        """The table. Every column is all ints or all floats, so numpy makes the same dtypes pandas would
        (int64 and float64), three times faster than pandas reading a million-row list."""
        if not len(self):
            return pd.DataFrame({name: [] for name in STEP_COLUMNS + POOL_COLUMNS})
        table = {name: _as_numpy(column) for name, column in self.columns.items()}
        if self.blocks is not None:
            table.update(zip(("step",) + INT_COLUMNS, self.blocks.columns(), strict=True))
        table.update(zip(POOL_COLUMNS, self.pools.columns(len(self)), strict=True))
        # the row-by-row columns are views of this log's arrays: a table of its own copies them
        return pd.DataFrame(table, copy=not (FRAME_UNCOPIED and self.blocks is not None))


def _extend_times(column: list | array, times: StepTimes) -> None:
    """A time column extended by a run's floats, a list or a float64 array (``decode_run_settled.ARRAY_RUNS``),
    an array's copied in as bytes where the column is doubles."""
    if isinstance(times, list):
        column.extend(times)
    elif isinstance(column, array):
        column.frombytes(np.ascontiguousarray(times, dtype=np.float64).data.cast("B"))
    else:
        column.extend(times.tolist())


def _as_numpy(column: list | array) -> np.ndarray:
    if isinstance(column, array) and column.typecode == "q":
        return np.frombuffer(column, dtype=np.int64)
    return np.array(column)  # a list of floats, or doubles copied (the table's own, not a view of the log's)


def run_pool_columns(pools: Sequence[int], full_steps, num_steps: int, kv_columns) -> list[array]:
    """Each pool column after each of a batch run's ``num_steps`` steps, from the pools before it (what
    ``StepLog.extend_batch_run`` records, row by row: the step events' rows and the tests' reference): a full step
    (``FullStep``) that started pages moved them from free to running in each KV pool (``kv_columns``: each
    one's free column, its running column next), an event step reads as its ``usage``; any other step as the
    step before. A stretch of steps starting the same pages each is a range per KV column."""
    pools = list(pools)
    columns = [array("q") for _ in pools]
    done = 0
    for full in full_steps:
        _repeat(columns, pools, full.offset - done)
        if full.usage is not None:
            pools = list(pool_values(full.usage))
            _repeat(columns, pools, 1)
        else:
            _move_pages(columns, pools, kv_columns, full.pages, full.num_steps)
        done = full.offset + full.num_steps
    _repeat(columns, pools, num_steps - done)
    return columns


def _repeat(columns: list[array], pools: list[int], count: int) -> None:
    if count == 1:
        for column, value in zip(columns, pools, strict=True):
            column.append(value)
    elif count > 0:
        for column, value in zip(columns, pools, strict=True):
            column.extend(array("q", (value,)) * count)


def _move_pages(columns: list[array], pools: list[int], kv_columns, pages: int, count: int) -> None:
    """``count`` steps each moving ``pages`` pages from free to running in the KV pools; ``pools`` follows."""
    moved = pages * count
    for free in kv_columns:
        if count == 1:
            pools[free] -= pages
            pools[free + 1] += pages
            continue
        columns[free].extend(range(pools[free] - pages, pools[free] - moved - 1, -pages))
        columns[free + 1].extend(range(pools[free + 1] + pages, pools[free + 1] + moved + 1, pages))
        pools[free] -= moved
        pools[free + 1] += moved
    if count == 1:
        _repeat(columns, pools, 1)
        return
    for index, (column, value) in enumerate(zip(columns, pools, strict=True)):
        if index not in kv_columns and index - 1 not in kv_columns:
            column.extend(array("q", (value,)) * count)


class ReplaySteps:
    """A replay's per-request rows (``step``, ``request`` and the pools at the request's peak), the pool values
    held as machine integers: a row of Python ints would cost about 400 bytes."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.pools = [array("q") for _ in POOL_COLUMNS]

    def append(self, request_id: str, pools: tuple[int, ...]) -> None:
        self.requests.append(request_id)
        for column, value in zip(self.pools, pools, strict=True):
            column.append(value)

    def frame(self) -> pd.DataFrame:
        """The same table, dtypes included, as a DataFrame of (step, request, *pools) tuples would make."""
        columns = ("step", "request") + POOL_COLUMNS
        if not self.requests:
            return pd.DataFrame([], columns=columns)
        values = [np.arange(len(self.requests), dtype=np.int64), self.requests]
        values += [np.frombuffer(column, dtype=np.int64) for column in self.pools]
        return pd.DataFrame(dict(zip(columns, values, strict=True)))
