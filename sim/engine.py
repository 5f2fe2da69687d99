"""The SimPy engine: arrivals, closed-loop sessions, and one engine loop that advances time.

The loop sleeps on an event while idle; otherwise schedule -> backend.run(batch) -> ``timeout(step)``
-> postprocess. Monitoring is appending rows (``EngineLog``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import simpy

from sim.backend import Backend, batch_shape
from sim.metrics import POOL_COLUMNS, pool_row
from sim.scheduler import Scheduler
from sim.trace import Trace

STEP_COLUMNS = ("step", "start_at", "duration_s", "num_prefill", "prefill_tokens", "num_decode")


class StepLog:
    """One row per engine step, kept as columns: a long run has about a million steps."""

    def __init__(self):
        self.columns: dict[str, list] = {name: [] for name in STEP_COLUMNS + POOL_COLUMNS}

    def append(self, step: tuple, pools: tuple) -> None:
        for name, value in zip(STEP_COLUMNS + POOL_COLUMNS, step + pools, strict=True):
            self.columns[name].append(value)

    def append_same_pools(self, step: tuple) -> None:
        """A step that allocated nothing: the pools read as after the previous one."""
        for name, value in zip(STEP_COLUMNS, step, strict=True):
            self.columns[name].append(value)
        for name in POOL_COLUMNS:
            column = self.columns[name]
            column.append(column[-1])

    def __len__(self) -> int:
        return len(self.columns["step"])

    def frame(self) -> pd.DataFrame:
        """The table. Every column is all ints or all floats, so numpy makes the same dtypes pandas would,
        three times faster than pandas reading a million-row list."""
        if not len(self):
            return pd.DataFrame(self.columns)
        return pd.DataFrame({name: np.array(column) for name, column in self.columns.items()})


@dataclass
class EngineLog:
    arrived_at: dict[str, float] = field(default_factory=dict)
    first_token_at: dict[str, float] = field(default_factory=dict)
    finished_at: dict[str, float] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # request id -> why it can never run
    steps: StepLog = field(default_factory=StepLog)


class Engine:
    def __init__(self, env: simpy.Environment, trace: Trace, scheduler: Scheduler, backend: Backend,
                 fits=None, on_step=None, fast_path: bool | None = None):
        self.env, self.trace, self.scheduler, self.backend = env, trace, scheduler, backend
        self.manager = scheduler.manager
        self.log = EngineLog()
        self.fits = fits or (lambda request_id: None)  # returns why a request can never fit, or None
        self.on_step = on_step or (lambda: None)
        # a backend that only predicts lets runs of plain decode steps skip the scheduler
        self.fast_path = hasattr(backend, "decode_times") if fast_path is None else fast_path
        self.iteration = 0
        self._stalled: dict[str, int] = {}  # request id -> retractions with nothing else progressing
        self._wake: simpy.Event | None = None
        self._followers: dict[str, list[str]] = {}
        for request in trace:
            if request.after is not None:
                self._followers.setdefault(request.after, []).append(request.id)

    def start(self) -> None:
        self.env.process(self._arrivals())
        self.env.process(self._loop())

    # ---- processes ----------------------------------------------------------------------------------
    def _arrivals(self):
        # requests arriving together are submitted together, before the engine forms its next batch
        for arrival, group in itertools.groupby(sorted((r for r in self.trace if r.after is None),
                                                       key=lambda r: r.arrival), key=lambda r: r.arrival):
            yield self.env.timeout(max(0.0, arrival - self.env.now))
            for request in group:
                self._submit(request.id)

    def _follow(self, request_id: str):
        yield self.env.timeout(self.trace.request(request_id).think_time)
        self._submit(request_id)

    def _loop(self):
        while True:
            if not self.scheduler.has_work():
                self._wake = self.env.event()
                yield self._wake
            batch = self.scheduler.schedule(self.iteration)
            if not batch:
                self._unblock()
                continue
            started_at = self.env.now
            duration = self.backend.run(batch, self.manager)
            yield self.env.timeout(duration)
            outcome = self.scheduler.postprocess(batch)
            self._stalled.clear()
            self._record_step(batch, started_at, duration)
            for request_id in outcome.first_tokens:
                self.log.first_token_at.setdefault(request_id, self.env.now)
            for request_id in outcome.finished:
                self._finish(request_id)
            self.iteration += 1
            self.on_step()
            if self.fast_path:
                yield from self._plain_run()

    def _plain_run(self):
        """Decode-only steps that change nothing but lengths, each ending before the next arrival or
        follow-up: the same steps, times and rows as the full loop, without scheduling each one."""
        runs, num_steps = self.scheduler.plain_decode_run(self.iteration)
        if not num_steps:
            return
        requests = self.manager.requests
        durations = self.backend.decode_times(tuple(requests[r.request_id].kv_len for r in runs))
        done = 0
        for duration in durations:
            if done == num_steps or not self.env.now + duration < self.env.peek():
                break
            started_at = self.env.now
            yield self.env.timeout(duration)
            self.log.steps.append_same_pools((self.iteration, started_at, duration, 0, 0, len(runs)))
            self.iteration += 1
            done += 1
            self.on_step()
        self.scheduler.advance_plain(runs, done)

    # ---- events -------------------------------------------------------------------------------------
    def _submit(self, request_id: str) -> None:
        self.log.arrived_at[request_id] = self.env.now
        why = self.fits(request_id)
        if why is not None:
            self._reject(request_id, why)
            return
        tokens = self.trace.request_seq(request_id)
        request = self.trace.request(request_id)
        self.scheduler.add(request_id, tokens, self.trace.prompt_len(request_id), request.output_len)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _finish(self, request_id: str) -> None:
        self.log.finished_at[request_id] = self.env.now
        for follower in self._followers.get(request_id, []):
            self.env.process(self._follow(follower))

    def _reject(self, request_id: str, why: str) -> None:
        self.log.rejected[request_id] = why
        self._finish(request_id)  # its session goes on: the follow-up is judged on its own

    def _unblock(self) -> None:
        """Nothing could be scheduled: free the newest running request, or give up on the waiting head
        when even an empty engine cannot hold it."""
        newest = self.scheduler.newest_running()
        if newest is not None and self._stalled.get(newest, 0) < 3:
            self._stalled[newest] = self._stalled.get(newest, 0) + 1
            self.scheduler.retract_newest()
            return
        if newest is not None:
            self.scheduler.retract_newest()
        request_id = self.scheduler.waiting.popleft()[0]
        self._reject(request_id, "the pools cannot hold it even with the cache emptied")

    def _record_step(self, batch, started_at: float, duration: float) -> None:
        shape = batch_shape(batch)
        pools = tuple(pool_row(self.manager.usage()).values())
        self.log.steps.append((self.iteration, started_at, duration, len(shape.prefill), shape.num_prefill_tokens,
                               shape.num_decode_tokens), pools)
