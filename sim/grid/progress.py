"""The sweep's progress bar on stderr: points done (of all), running now, and failed."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

ProgressUpdate = Callable[[int, int, int], None]  # (done, running, failed)


@contextlib.contextmanager
def sweep_progress(total: int, enabled: bool = True) -> Iterator[ProgressUpdate]:
    """Yields ``update(done, running, failed)``. On a terminal the bar redraws live; elsewhere (a log,
    a pipe) rich prints it once, at the end."""
    if not enabled:
        yield lambda done, running, failed: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("grid"), BarColumn(), TextColumn("{task.fields[done]}/{task.total} done"),
               TextColumn("{task.fields[running]} running"), TextColumn("{task.fields[failed]} failed"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task("grid", total=total, done=0, running=0, failed=0)

        def update(done: int, running: int, failed: int) -> None:
            progress.update(task, completed=done + failed, done=done, running=running, failed=failed)

        yield update
