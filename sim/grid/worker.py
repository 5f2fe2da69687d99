"""One sweep point, as a worker process (or Ray task) runs it: load the trace once, simulate, pack.

Everything a worker returns is plain data (CSV text, dicts), so the driver alone writes the store and a
Ray cluster's workers need no access to the driver's disk.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sim.code_version import code_identity
from sim.grid.axes import KNOB_NAMES
from sim.grid.points import config_from_dict, config_key, key_parts
from sim.run.resolved import flat_resolved
from sim.run.setup import build
from sim.run.simulate import simulate
from sim.run.tables_io import csv_text
from sim.trace import Trace, load_trace

_TRACES: dict[str, Trace] = {}  # per worker process: a trace is parsed once, however many points it runs


@dataclass(frozen=True)
class PointTask:
    key: str
    config: dict  # config_to_dict of the point's SimConfig
    trace_path: str
    trace_sha256: str


@dataclass(frozen=True)
class PointOutcome:
    key: str
    config: dict
    record: dict | None = None  # the point's JSON record; None when it failed
    requests_csv: str = ""
    steps_csv: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.record is not None


def run_task(task: PointTask, trace_bytes: bytes | None = None, on_step=None) -> PointOutcome:
    """Simulate one point; any exception becomes a failed outcome naming the error, never a crash.
    ``on_step(done)``: the requests done so far, as the run goes."""
    try:
        trace = _trace(task, trace_bytes)
        config = config_from_dict(task.config)
        setup = build(config)  # once: the run, its resolved record and its key read the same one
        result = simulate(trace, config, setup=setup, on_step=on_step)
        summary = result.summary.as_dict()
        record = {
            "key": task.key,
            "config": task.config,
            "resolved": flat_resolved(setup, KNOB_NAMES),
            "summary": summary,
            "trace": {"path": task.trace_path, "sha256": task.trace_sha256},
            "code": code_identity(),
            "config_key": config_key(task.trace_sha256, config),
            "key_parts": key_parts(config),
        }
        check_finite(summary)
        return PointOutcome(
            task.key,
            task.config,
            record,
            csv_text(result.requests),
            csv_text(result.steps),
        )
    except Exception as e:  # a point's failure is data for the sweep, not a crash
        return PointOutcome(task.key, task.config, error=f"{type(e).__name__}: {e}")


def check_finite(summary: dict) -> None:
    """A point whose summary holds inf or NaN fails here, alone, naming the field: stored, it would be
    invalid JSON (and abort the sweep when written)."""
    bad = [
        f"{name} = {value}"
        for name, value in summary.items()
        if isinstance(value, float) and not math.isfinite(value)
    ]
    if bad:
        raise ValueError(f"the summary is not finite ({', '.join(bad)}): check the calibration and the knobs")


def _trace(task: PointTask, trace_bytes: bytes | None) -> Trace:
    if task.trace_sha256 not in _TRACES:
        data = trace_bytes if trace_bytes is not None else Path(task.trace_path).read_bytes()
        if hashlib.sha256(data).hexdigest() != task.trace_sha256:
            raise ValueError(f"{task.trace_path}: the trace changed while the sweep was running")
        _TRACES[task.trace_sha256] = (
            _load_bytes(data, task.trace_path) if trace_bytes is not None else load_trace(task.trace_path)
        )
    return _TRACES[task.trace_sha256]


def _load_bytes(data: bytes, name: str) -> Trace:
    """A Ray worker gets the trace's bytes, not its path: parse them from a private temporary copy."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(name).name
        path.write_bytes(data)
        return load_trace(path)
