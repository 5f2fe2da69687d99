"""Where the points run: in this process, in local worker processes, or as Ray tasks (which report no
progress inside a point: the sweep's shows their points as they finish).

Each runner yields outcomes as points finish (in completion order; the sweep restores grid order) and
cancels what has not started when the consumer stops early (an error, Ctrl-C, a test's kill hook).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from sim.grid.worker import PointOutcome, PointTask, run_task
from sim.grid.workers import run_workers

LOCAL_RAY = "local"  # ``--ray`` without an address: start a private Ray on this machine


def default_jobs() -> int:
    return os.cpu_count() or 1


OnProgress = Callable[[str, int], None]  # (point key, its requests done so far)


def run_serial(tasks: list[PointTask], on_progress: OnProgress | None = None) -> Iterator[PointOutcome]:
    for task in tasks:
        step = (lambda done, key=task.key: on_progress(key, done)) if on_progress else None
        yield run_task(task, on_step=step)


def run_processes(
    tasks: list[PointTask], jobs: int, on_progress: OnProgress | None = None
) -> Iterator[PointOutcome]:
    """Local worker processes (``sim/grid/workers.py``): a worker that dies fails only its own point.
    ``on_progress`` hears how far each point in flight got."""
    if jobs == 1 or len(tasks) <= 1:
        yield from run_serial(tasks, on_progress)
        return
    yield from run_workers(tasks, jobs, on_progress)


def require_ray():
    """The ray module, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ValueError(f"--ray needs Ray: pip install -e '.[ray]' ({e})") from None
    return ray


def run_ray(tasks: list[PointTask], address: str, num_cpus: int) -> Iterator[PointOutcome]:
    """Ray tasks on the cluster at ``address`` (LOCAL_RAY: a private one with ``num_cpus`` CPUs).

    The trace travels through Ray's object store, so a remote cluster needs no copy of the file; on a
    remote cluster the ``sim`` package is shipped as a runtime-env module."""
    if not tasks:
        return  # every point already done: no need to start or reach a cluster
    ray = require_ray()
    started = _ray_init(ray, address, num_cpus)
    try:
        yield from _ray_outcomes(ray, tasks)
    finally:
        if started:
            ray.shutdown()


def _ray_outcomes(ray, tasks: list[PointTask]) -> Iterator[PointOutcome]:
    """Submit every point, yield each as it finishes; cancel what is left when the consumer stops."""
    trace_ref = ray.put(Path(tasks[0].trace_path).read_bytes())
    remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
    tasks_of = {remote.remote(task, trace_ref): task for task in tasks}
    pending = list(tasks_of)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield _ray_outcome(ray, done[0], tasks_of[done[0]])
    finally:
        for ref in pending:
            ray.cancel(ref)


def _ray_outcome(ray, ref, task: PointTask) -> PointOutcome:
    try:
        return ray.get(ref)
    except Exception as e:  # the task's worker died or the cluster lost it: that point failed
        return PointOutcome(task.key, task.config, error=f"{type(e).__name__}: {e}")


def _ray_init(ray, address: str, num_cpus: int) -> bool:
    """Connect to (or start) Ray; True when this call started it and so must shut it down."""
    if ray.is_initialized():
        return False
    sim_dir = Path(__file__).resolve().parents[1]
    if address == LOCAL_RAY:
        # workers start elsewhere than this process: point them at this checkout's ``sim``
        paths = [str(sim_dir.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
        )
    else:
        ray.init(address=address, runtime_env={"py_modules": [str(sim_dir)]}, log_to_driver=False)
    return True
