"""The per-step tables of a run, kept as columns: a long timed run has about a million steps, a replay of a
million-request trace a million rows."""

from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from sim.cache.events import EventBus, PlainStepsEnded, StepEnded
from sim.run.metrics import POOL_COLUMNS

STEP_COLUMNS = ("step", "start_at", "duration_s", "num_prefill", "prefill_tokens", "num_decode")


class StepLog:
    """Subscribed to a run's ``StepEnded`` and ``PlainStepsEnded`` events: a row per step."""

    def __init__(self, events: EventBus):
        self.columns: dict[str, list] = {name: [] for name in STEP_COLUMNS + POOL_COLUMNS}
        self._row_columns = list(self.columns.values())  # in a row's order
        events.subscribe(StepEnded, self._on_step)
        events.subscribe(PlainStepsEnded, self._on_plain_steps)

    def _on_step(self, event: StepEnded) -> None:
        self.append(event.step, event.pools)

    def _on_plain_steps(self, e: PlainStepsEnded) -> None:
        self.extend_decode_only(e.first_step, e.starts, e.durations, e.num_decode)

    def append(self, step: tuple, pools: tuple) -> None:
        for column, value in zip(self._row_columns, step + pools, strict=True):
            column.append(value)

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
