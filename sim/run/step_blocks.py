"""The step table's integer columns kept as blocks of rows, made row by row only when the table is made.

A timed run's rows come as a full step's row or as a run of decode steps (tens to thousands of rows) whose
integer columns are a count of steps numbered on from the first, no prefill, and one decode batch size. So each
write is a block (its first step, its rows, and the three counts every row of it shares), and ``columns`` makes
the four columns for the whole table at once with numpy: a step number is its block's first plus the row's
offset in the block. A full step's row is a block of one. The reference writes each row into the columns
(``StepLog`` with ``INT_COLUMNS_AS_BLOCKS`` off; ``tests/test_step_blocks.py`` holds both equal).
"""

from __future__ import annotations

from array import array

import numpy as np


class StepBlocks:
    def __init__(self) -> None:
        self.first_steps = array("q")
        self.counts = array("q")
        self.num_prefill = array("q")
        self.prefill_tokens = array("q")
        self.num_decode = array("q")

    def add(
        self, first_step: int, count: int, num_prefill: int, prefill_tokens: int, num_decode: int
    ) -> None:
        """``count`` rows numbered from ``first_step`` on, each with these counts."""
        self.first_steps.append(first_step)
        self.counts.append(count)
        self.num_prefill.append(num_prefill)
        self.prefill_tokens.append(prefill_tokens)
        self.num_decode.append(num_decode)

    def columns(self) -> list[np.ndarray]:
        """The ``step``, ``num_prefill``, ``prefill_tokens`` and ``num_decode`` columns, a value a row (int64)."""
        counts = np.frombuffer(self.counts, dtype=np.int64)
        num_rows = int(counts.sum())
        first_rows = np.cumsum(counts) - counts  # each block's first row
        offsets = np.frombuffer(self.first_steps, dtype=np.int64) - first_rows
        steps = np.repeat(offsets, counts) + np.arange(num_rows, dtype=np.int64)
        shared = (self.num_prefill, self.prefill_tokens, self.num_decode)
        return [steps] + [np.repeat(np.frombuffer(values, dtype=np.int64), counts) for values in shared]
