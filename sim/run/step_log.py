"""The per-step table of a timed run, kept as columns: a long run has about a million steps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.cache.events import EventBus, PlainStepsEnded, StepEnded
from sim.run.metrics import POOL_COLUMNS

STEP_COLUMNS = ("step", "start_at", "duration_s", "num_prefill", "prefill_tokens", "num_decode")


class StepLog:
    """Subscribed to a run's ``StepEnded`` and ``PlainStepsEnded`` events: a row per step."""

    def __init__(self, events: EventBus):
        self.columns: dict[str, list] = {name: [] for name in STEP_COLUMNS + POOL_COLUMNS}
        events.subscribe(StepEnded, self._on_step)
        events.subscribe(PlainStepsEnded, self._on_plain_steps)

    def _on_step(self, event: StepEnded) -> None:
        self.append(event.step, event.pools)

    def _on_plain_steps(self, e: PlainStepsEnded) -> None:
        self.extend_decode_only(e.first_step, e.starts, e.durations, e.num_decode)

    def append(self, step: tuple, pools: tuple) -> None:
        for name, value in zip(STEP_COLUMNS + POOL_COLUMNS, step + pools, strict=True):
            self.columns[name].append(value)

    def extend_decode_only(
        self, first_step: int, starts: list[float], durations: list[float], num_decode: int
    ) -> None:
        """Steps that only decoded and allocated nothing: the pools read as after the step before."""
        count, columns = len(starts), self.columns
        columns["step"].extend(range(first_step, first_step + count))
        columns["start_at"].extend(starts)
        columns["duration_s"].extend(durations)
        for name, value in (("num_prefill", 0), ("prefill_tokens", 0), ("num_decode", num_decode)):
            columns[name].extend([value] * count)
        for name in POOL_COLUMNS:
            columns[name].extend([columns[name][-1]] * count)

    def __len__(self) -> int:
        return len(self.columns["step"])

    def frame(self) -> pd.DataFrame:
        """The table. Every column is all ints or all floats, so numpy makes the same dtypes pandas would,
        three times faster than pandas reading a million-row list."""
        if not len(self):
            return pd.DataFrame(self.columns)
        return pd.DataFrame({name: np.array(column) for name, column in self.columns.items()})
