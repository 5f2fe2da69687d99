"""The sweep's progress on stderr, counted in requests so that it moves inside every point: the requests of
finished points and of the points in flight (their workers report as they go) of all, with an ETA, and how
many points are done, run now and failed. A live bar on a terminal, a line every few seconds in a log
(``sim/progress.py``), from the start of the sweep."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sim.progress import progress


class GridProgress:
    def __init__(self, update, total_points: int, requests_per_point: int):
        self.update, self.total, self.per_point = update, total_points, max(requests_per_point, 1)
        self.finished = self.running = self.failed = 0
        self.in_flight: dict[str, int] = {}  # point key -> its requests done so far

    def points(self, finished: int, running: int, failed: int) -> None:
        """Points finished (ok or failed), running, and failed of them."""
        self.finished, self.running, self.failed = finished, running, failed
        self._show()

    def point_started_or_moved(self, key: str, done: int) -> None:
        self.in_flight[key] = done
        self._show()

    def point_ended(self, key: str) -> None:
        self.in_flight.pop(key, None)

    def _show(self) -> None:
        done = self.finished * self.per_point + sum(self.in_flight.values())
        note = f"{self.finished} / {self.total} points, {self.running} running, {self.failed} failed"
        self.update(done, note)


@contextlib.contextmanager
def sweep_progress(
    total_points: int, requests_per_point: int, enabled: bool = True, stream=None
) -> Iterator[GridProgress]:
    total = total_points * max(requests_per_point, 1)
    with progress(total, "grid", "requests", stream=stream, enabled=enabled) as update:
        yield GridProgress(update, total_points, requests_per_point)
