"""Progress of a long run on stderr: a live bar with the total and an ETA on a terminal; elsewhere (a log,
a pipe, CI) one plain line every few seconds, so a log shows the run is alive without filling up. A line comes
every few seconds even while nothing moves (a long step, the bounds after the run): a heartbeat thread
prints the last state, with its note saying what the run is doing."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

LOG_INTERVAL_S = 5.0  # seconds between two lines in a log


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class LogProgress:
    """Plain lines, at most one per ``interval_s``: ``label: done / total unit (pct), elapsed, ETA``."""

    def __init__(
        self,
        total: int,
        label: str,
        unit: str,
        stream,
        interval_s: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.label, self.unit, self.stream = total, label, unit, stream
        self.interval_s, self.clock = interval_s, clock
        self.started = self.last_line = clock()
        self.first_done: int | None = None  # work already done when the run began (a resumed sweep)
        self.done, self.note, self.printed = 0, "", False
        self._lock = threading.Lock()  # the heartbeat and the updates print whole lines, one at a time

    def update(self, done: int, note: str = "") -> None:
        if self.first_done is None:
            self.first_done = done
        self.done, self.note = done, note
        self.tick()

    def tick(self) -> None:
        """A line if none was printed for an interval (the heartbeat calls it while nothing updates)."""
        with self._lock:
            now = self.clock()
            if now - self.last_line >= self.interval_s:
                self.last_line = now
                self._line(now)

    def close(self) -> None:
        with self._lock:
            if self.printed:  # a run long enough to log says when it ended
                self._line(self.clock(), final=True)

    def eta_s(self, now: float) -> float | None:
        ran = self.done - (self.first_done or 0)
        left = self.total - self.done
        return None if ran <= 0 else (now - self.started) * left / ran

    def _line(self, now: float, final: bool = False) -> None:
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        text = f"{self.label}: {self.done:,} / {self.total:,} {self.unit}{share}, {_duration(now - self.started)} elapsed"
        eta = self.eta_s(now)
        if final:
            text += ", finished"
        elif eta is not None:
            text += f", ETA {_duration(eta)}"
        print(text + (f"; {self.note}" if self.note else ""), file=self.stream, flush=True)
        self.printed = True


@contextlib.contextmanager
def progress(
    total: int, label: str, unit: str, stream=None, interval_s: float | None = None, enabled: bool = True
) -> Iterator[Callable[..., None]]:
    """Yields ``update(done, note="")`` (cheap to call often: nothing happens unless ``done`` moved).
    ``interval_s``: between two log lines (default ``LOG_INTERVAL_S``)."""
    stream = sys.stderr if stream is None else stream
    interval_s = LOG_INTERVAL_S if interval_s is None else interval_s
    if not enabled:
        yield lambda done, note="": None
        return
    if stream.isatty():
        with _live_bar(total, label, unit, stream) as live:
            yield live
        return
    log = LogProgress(total, label, unit, stream, interval_s)
    last = [-1, ""]

    def update(done: int, note: str = "") -> None:
        if done != last[0] or note != last[1]:
            last[:] = [done, note]
            log.update(done, note)

    with _heartbeat(log):
        try:
            yield update
        finally:
            log.close()


@contextlib.contextmanager
def _heartbeat(log: LogProgress) -> Iterator[None]:
    """A daemon thread that asks ``log`` for a line every second (it prints one each interval_s)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(min(1.0, log.interval_s)):
            log.tick()

    thread = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _live_bar(total: int, label: str, unit: str, stream) -> Iterator[Callable[..., None]]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
    )
    with Progress(*columns, console=Console(file=stream), transient=True) as bar:
        task = bar.add_task(label, total=total, note="")
        last = [-1, ""]

        def update(done: int, note: str = "") -> None:
            if done != last[0] or note != last[1]:
                last[:] = [done, note]
                bar.update(task, completed=done, note=note)

        yield update
