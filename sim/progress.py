"""A progress bar for long simulations, on stderr and only when stderr is a terminal."""
from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def step_progress(num_requests: int, label: str):
    """Yields an ``on_step`` callback; the bar shows engine steps (the run's natural unit of work)."""
    if not sys.stderr.isatty() or num_requests < 200:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} steps"),
                  TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task(label, total=None)
        yield lambda: progress.advance(task)
