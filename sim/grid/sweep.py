"""A sweep: every grid point simulated once, results stored per point, finished points never rerun."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sim.cost.calibration import load_calibration
from sim.grid.axes import KNOB_NAMES
from sim.grid.keep_old import adopt_old_points
from sim.grid.points import GridPoint, config_to_dict, describe, file_sha256, make_points
from sim.grid.progress import GridProgress, sweep_progress
from sim.grid.runners import default_jobs, require_ray, run_processes, run_ray
from sim.grid.store import PointStore, check_store_dir
from sim.grid.worker import PointOutcome, PointTask
from sim.run.config import SimConfig
from sim.trace import load_trace

CONFIG_COLUMNS = (
    "policy",
    "model",
    "gpu",
    "mode",
    "calibration",
    "pool_tokens",
    "swa_pool_tokens",
    "mamba_states",
    "kv_memory_gb",
    "swa_full_tokens_ratio",
    "mamba_full_memory_ratio",
    "cache_bytes",
    "request_rate_scale",
    "slo",
)
POOL_COLUMNS = ("full_pages", "swa_pages", "mamba_pool_states")


@dataclass(frozen=True)
class GridRun:
    root: Path
    points: list[GridPoint]
    ran: list[str]  # keys simulated by this call
    skipped: list[str]  # keys already complete in the store, not rerun
    failed: list[dict]  # failure records (key, config, error) of this call
    table: pd.DataFrame  # what grid.csv holds


def run_grid(
    trace_path: str | Path,
    configs: list[SimConfig],
    out_dir: str | Path,
    jobs: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    on_outcome: Callable[[PointOutcome], None] | None = None,
    keep_old: bool = False,
) -> GridRun:
    """Run every point of ``configs`` not yet in ``out_dir``: local processes (``jobs``, default one per
    core), or Ray tasks when ``ray_address`` is given (``runners.LOCAL_RAY`` starts a private Ray).
    ``on_outcome`` sees each finished point; an exception there stops the sweep (finished points kept).
    ``keep_old``: a point stored by other code for the same inputs is kept, not recomputed."""
    if not configs:
        raise ValueError("the grid has no points")
    check_store_dir(out_dir)  # the output rule, before any work
    num_requests = len(load_trace(trace_path))  # a bad trace (or calibration) is refused here, whole
    for calibration in sorted({c.calibration for c in configs if c.calibration is not None}):
        load_calibration(calibration)
    if ray_address:
        require_ray()
    trace_sha = file_sha256(trace_path)
    points = make_points(trace_sha, configs)
    store = PointStore(out_dir, create=True)
    if keep_old:
        points = adopt_old_points(store, trace_sha, points)
    store.write_manifest(
        {"trace": {"path": str(trace_path), "sha256": trace_sha}, "points": [p.key for p in points]}
    )
    skipped = [p.key for p in points if store.is_complete(p.key, trace_sha)]
    done = set(skipped)
    tasks = [
        PointTask(p.key, config_to_dict(p.config), str(trace_path), trace_sha)
        for p in points
        if p.key not in done
    ]
    jobs = jobs or default_jobs()
    with sweep_progress(len(points), num_requests, progress) as shown:
        moved = shown.point_started_or_moved
        outcomes = run_ray(tasks, ray_address, jobs) if ray_address else run_processes(tasks, jobs, moved)
        ran, failed = _collect(
            store, outcomes, (len(points), len(skipped)), min(jobs, len(tasks)), shown, on_outcome
        )
    return _finish(store, points, skipped, ran, failed)


def _finish(
    store: PointStore, points: list[GridPoint], skipped: list[str], ran: list[str], failed: list[dict]
) -> GridRun:
    """grid.csv written; what ran and failed listed in grid order, whatever order the workers finished in."""
    table = grid_table(store, points)
    store.write_table(table)
    order = {p.key: i for i, p in enumerate(points)}
    ran.sort(key=order.__getitem__)
    failed.sort(key=lambda f: order[f["key"]])
    return GridRun(store.root, points, ran, skipped, failed, table)


def _collect(
    store: PointStore, outcomes, counts: tuple[int, int], slots: int, shown: GridProgress, on_outcome
) -> tuple[list[str], list[dict]]:
    """Store each outcome as it arrives; ``counts``: the grid's points and those done before this call. The
    progress's "running" is the points in flight on the workers."""
    ran, failed = [], []
    total, done = counts
    left = total - done
    shown.points(done, min(slots, left), 0)
    for outcome in outcomes:
        if outcome.ok:
            store.write_point(outcome.record, outcome.requests_csv, outcome.steps_csv)
            ran.append(outcome.key)
        else:
            failed.append({"key": outcome.key, "config": outcome.config, "error": outcome.error})
            store.write_failure(failed[-1])
        left -= 1
        shown.point_ended(outcome.key)
        shown.points(total - left, min(slots, left), len(failed))
        if on_outcome:
            on_outcome(outcome)
    return ran, failed


def grid_table(store: PointStore, points: list[GridPoint]) -> pd.DataFrame:
    """One row per point in grid order: status, configuration, knobs as run, pool sizes, summary."""
    rows = []
    for point in points:
        if store.is_done(point.key):
            rows.append(_row(point, "ok", store.read_point(point.key)))
        elif (failure := store.read_failure(point.key)) is not None:
            rows.append(_row(point, "failed", failure))
    return _with_integer_columns(rows)


def _with_integer_columns(rows: list[dict]) -> pd.DataFrame:
    """Counts stay integers (16, not 16.0) in a table where failed rows leave them empty."""
    frame = pd.DataFrame(rows)
    for name in frame.columns:
        values = [row[name] for row in rows if row.get(name) is not None]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[name] = frame[name].astype("Int64")
    return frame


def _row(point: GridPoint, status: str, record: dict) -> dict:
    config = config_to_dict(point.config)
    row = {"key": point.key, "status": status, **{name: config[name] for name in CONFIG_COLUMNS}}
    resolved = record.get("resolved", {})
    for name in KNOB_NAMES + POOL_COLUMNS:
        row[name] = resolved.get(name, config["knobs"].get(name))
    row.update(record.get("summary", {}))
    row["error"] = record.get("error", "")
    return row


def describe_interrupted(out_dir: str | Path) -> str:
    """What an interrupted sweep kept, and how to finish it."""
    try:
        store = PointStore(out_dir)
        keys = store.read_manifest()["points"]
    except (ValueError, OSError, KeyError, TypeError):
        return "no point had finished"
    done = sum(store.is_done(key) for key in keys)
    return (
        f"{done} of {len(keys)} points are finished and kept in {store.root}; run the same command again "
        "to finish the rest"
    )


def describe_run(run: GridRun) -> str:
    """What the CLI prints at the end: counts, where the table is, and each failed point with its error."""
    lines = [
        f"{len(run.points)} points: {len(run.ran)} ran, {len(run.skipped)} already done, "
        f"{len(run.failed)} failed; table: {run.root / 'grid.csv'}"
    ]
    for failure in run.failed:
        lines.append(f"failed {failure['key']}: {describe(failure['config'])}: {failure['error']}")
    return "\n".join(lines)
