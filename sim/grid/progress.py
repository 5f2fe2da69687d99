"""The sweep's progress on stderr: points done of all, with an ETA, and how many run now and failed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from sim.progress import progress

ProgressUpdate = Callable[[int, int, int], None]  # (done, running, failed)


@contextlib.contextmanager
def sweep_progress(total: int, enabled: bool = True, stream=None) -> Iterator[ProgressUpdate]:
    """Yields ``update(done, running, failed)``: a live bar on a terminal, a line every few seconds in a
    log (``sim/progress.py``)."""
    with progress(total, "grid", "points", stream=stream, enabled=enabled) as update:

        def sweep_update(done: int, running: int, failed: int) -> None:
            update(done + failed, f"{running} running, {failed} failed")

        yield sweep_update
