"""Local worker processes for a sweep: one point at a time each, so a worker that dies fails only its point.

``concurrent.futures.ProcessPoolExecutor`` marks every pending point failed when one worker dies (the OOM
killer, a kill by hand): here each worker has its own pipe, the driver knows which point each one runs,
and a dead worker's point fails alone while a fresh worker takes its place. Workers die with the driver:
the kernel kills them when it exits (Linux's parent-death signal), and each also watches its parent and
leaves when it is gone. They ignore Ctrl-C: the driver decides what happens (it stops them and keeps every
finished point).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from sim.grid.worker import PointOutcome, PointTask, run_task

WORKER_NAME = "hybridcache-grid-worker"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_WATCH_INTERVAL_S = 1.0
_REPORT_INTERVAL_S = 1.0  # a point's progress reaches the driver about this often


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    task: PointTask | None = None


def run_workers(tasks: list[PointTask], jobs: int, on_progress=None) -> Iterator[PointOutcome]:
    """Each task run on one of ``jobs`` spawned workers; outcomes in completion order; ``on_progress(key,
    done)`` hears the requests each point in flight has done. Stopping the iteration early (an error,
    Ctrl-C) stops every worker."""
    context = multiprocessing.get_context("spawn")  # a worker starts clean whatever the driver imported
    queue = deque(tasks)
    workers: list[_Worker] = []
    tell = on_progress or (lambda key, done: None)
    try:
        for _ in range(min(jobs, len(tasks))):
            workers.append(_start(context))
            _assign(workers[-1], queue)
        while any(w.task is not None for w in workers):
            yield from _collect(context, workers, queue, tell)
    finally:
        _stop(workers)


def _collect(context, workers: list[_Worker], queue: deque, tell) -> Iterator[PointOutcome]:
    busy = [w for w in workers if w.task is not None]
    ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
    for index, worker in enumerate(workers):
        if worker.task is None or not ({worker.conn, worker.process.sentinel} & ready):
            continue
        task, outcome = worker.task, _receive(worker)
        if isinstance(outcome, Progress):  # the point goes on: its worker said how far it got
            tell(task.key, outcome.done)
            continue
        worker.task = None
        if outcome is None:  # it died: this point fails, a fresh worker takes the rest
            outcome = PointOutcome(task.key, task.config, error=_death(worker.process))
            worker.conn.close()
            workers[index] = worker = _start(context) if queue else worker
        _assign(worker, queue)
        yield outcome


@dataclass(frozen=True)
class Progress:
    """A worker's word on its point in flight: requests done so far."""

    done: int


def _receive(worker: _Worker) -> PointOutcome | Progress | None:
    try:
        if worker.conn.poll():
            return worker.conn.recv()
    except (EOFError, OSError):
        pass
    return None


def _death(process) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (the out-of-memory killer sends it, as does kill -9)" if -code == signal.SIGKILL else ""
        return f"WorkerDied: the worker running this point was killed by {name}{hint}"
    return f"WorkerDied: the worker running this point exited with status {code}"


def _assign(worker: _Worker, queue: deque) -> None:
    if queue:
        worker.task = queue.popleft()
        worker.conn.send(worker.task)


def _start(context) -> _Worker:
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs, os.getpid()), name=WORKER_NAME, daemon=True)
    with _sigint_blocked():  # inherited: a Ctrl-C while the worker is still importing must not reach it
        process.start()
    theirs.close()
    return _Worker(process, ours)


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back while a worker starts: the worker inherits the blocked mask (it stays blocked there,
    and it ignores Ctrl-C once it runs), the driver gets a Ctrl-C that came meanwhile when it is unblocked."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop(workers: list[_Worker]) -> None:
    for worker in workers:
        if worker.process.is_alive():
            worker.process.kill()
    for worker in workers:
        worker.process.join(timeout=10)
        worker.conn.close()


# ---- in the worker process ----------------------------------------------------------------------------
def _serve(conn: Connection, parent_pid: int) -> None:
    """A worker's life: run each task the driver sends, send its outcome back; leave with the driver."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the driver handles it
    _die_with_parent(parent_pid)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the driver closed the pipe or is gone
            return
        conn.send(run_task(task, on_step=_reporter(conn)))


def _reporter(conn: Connection):
    """``on_step`` for a point: sends the driver the requests done, at once on the first step (the point has
    begun), then at most every ``_REPORT_INTERVAL_S``."""
    last = [-_REPORT_INTERVAL_S]

    def report(done: int) -> None:
        now = time.monotonic()
        if now - last[0] >= _REPORT_INTERVAL_S:
            last[0] = now
            conn.send(Progress(done))

    return report


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the driver died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    """Where there is no parent-death signal: a worker whose driver is gone is re-parented; it leaves."""
    while os.getppid() == parent_pid:
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)
