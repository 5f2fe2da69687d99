"""A sweep under faults: the grid command killed with SIGKILL at random moments, interrupted with Ctrl-C, and
run twice; what it must keep, leave behind and print.

- kills: ``cli.py grid`` (2 workers) is killed with SIGKILL at a random moment, again and again, each run
  resuming the last. After every kill: no worker outlives it, every point file present is complete, and
  no finished point is recomputed later. At the end the store equals an uninterrupted run's byte for byte.
- ctrl-c: SIGINT to the command's process group (what a terminal sends): exit 130, one clean line, no
  traceback, no temporary file, no worker left; SIGTERM to the grid process alone: the same, exit 143.
- twice: the same command run twice (grid, simulate --out, report, trace import) gives byte-identical files.

    python benchmarks/grid_faults.py [--kills 10] [--seed 0] [--trace T] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.processes import children, wait_gone  # noqa: E402
from sim.atomic import temp_files  # noqa: E402
from sim.grid.store import PointStore  # noqa: E402

CLI = [sys.executable, str(REPO_ROOT / "cli.py")]
DEFAULT_TRACE = REPO_ROOT / "traces" / "mooncake_conversation_500.jsonl"
# 16 points of about a second each (timed mode, 500 requests)
AXES = [
    "--policy",
    "sglang,sglang-retain",
    "--page-size",
    "64,128",
    "--track-interval",
    "256,512",
    "--swa-eviction-interval",
    "64,128",
]


def grid_command(trace: Path, out: Path, jobs: int = 2) -> list[str]:
    return [*CLI, "grid", "--trace", str(trace), *AXES, "--out", str(out), "--jobs", str(jobs)]


def store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def complete_points(root: Path) -> dict[str, int]:
    """Key -> mtime of every point whose JSON is present; each must be whole (tables included)."""
    if not (root / "points").is_dir():  # killed before the store was made: nothing to keep, rightly
        return {}
    store, found = PointStore(root), {}
    for path in sorted((root / "points").glob("*.json")):
        key = path.stem
        store.read_requests(key), store.read_steps(key)  # raises if anything is missing or truncated
        found[key] = path.stat().st_mtime_ns
    return found


def kill_at_random(trace: Path, out: Path, kills: int, rng: random.Random, log=print) -> dict:
    """SIGKILL the sweep ``kills`` times at random moments; resume each time; return the figures."""
    figures: dict[str, Any] = {
        "kills": 0,
        "runs": 0,
        "points_seen_at_kills": [],
        "stale_temp_files": 0,
        "orphans": 0,
    }
    kept: dict[str, int] = {}
    while figures["kills"] < kills:
        started = time.monotonic()
        process = subprocess.Popen(
            grid_command(trace, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        figures["runs"] += 1
        delay = rng.uniform(0.5, 4.0)
        while time.monotonic() - started < delay and process.poll() is None:
            time.sleep(0.01)
        if process.poll() is not None:  # it finished before its kill: start over from scratch
            process.communicate()
            log(f"  run {figures['runs']}: finished before the kill at {delay:.2f} s; starting over")
            shutil.rmtree(out)
            kept = {}
            continue
        workers = children(process.pid)
        process.kill()
        process.communicate()
        figures["kills"] += 1
        figures["orphans"] += len(wait_gone(workers))
        figures["stale_temp_files"] += len(temp_files(out, out / "points", out / "failed"))
        points = complete_points(out)
        lost = {k for k in kept if points.get(k) != kept[k]}
        if lost:
            raise AssertionError(
                f"kill {figures['kills']}: finished points lost or rewritten: {sorted(lost)}"
            )
        kept = points
        figures["points_seen_at_kills"].append(len(points))
        log(
            f"  kill {figures['kills']} at {delay:.2f} s: {len(points)} points kept, {len(workers)} workers "
            f"gone, {figures['stale_temp_files']} stale temporary files so far"
        )
    final = subprocess.run(grid_command(trace, out), capture_output=True, text=True)
    if final.returncode != 0:
        raise AssertionError(f"the resumed sweep failed: {final.stderr[-2000:]}")
    if {k for k in kept if complete_points(out).get(k) != kept[k]}:
        raise AssertionError("the final run recomputed a point finished before the last kill")
    figures["temp_files_at_end"] = len(temp_files(out, out / "points", out / "failed"))
    return figures


def interrupt(trace: Path, out: Path, after_s: float, signum: int = signal.SIGINT) -> dict:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) ``after_s`` seconds in; SIGTERM goes to
    the grid process alone (as ``kill`` sends it): its workers must not outlive it either way."""
    process = subprocess.Popen(
        grid_command(trace, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    time.sleep(after_s)
    workers = children(process.pid)
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=60)
    return {
        "returncode": process.returncode,
        "message": stderr.strip().splitlines()[-1] if stderr.strip() else "",
        "traceback": "Traceback" in stderr,
        "workers_left": len(wait_gone(workers)),
        "temp_files": len(temp_files(out, out / "points", out / "failed")),
    }


def _default_sigint() -> None:
    """Ctrl-C's default action in the child: a shell starts background jobs with SIGINT ignored, and an
    interpreter that starts with it ignored never raises KeyboardInterrupt (a terminal's job has it on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_twice(trace: Path, folder: Path) -> dict[str, bool]:
    """Each command twice into fresh folders: are the two outputs byte-identical?"""
    same = {}
    commands = {
        "grid": lambda out: grid_command(trace, out / "store", jobs=2),
        "report": lambda out: [*CLI, "report", str(out / "store")],
        "simulate --out": lambda out: [
            *CLI,
            "simulate",
            "--trace",
            str(trace),
            "--out",
            str(out / "sim"),
            "--format",
            "json",
        ],
        "trace import": lambda out: [
            *CLI,
            "trace",
            "import",
            "mooncake",
            str(REPO_ROOT / "tests" / "data" / "mooncake_conversation_head.jsonl"),
            "-o",
            str(out / "imported.jsonl"),
        ],
    }
    outputs = {}
    for run in ("first", "second"):
        out = folder / run
        out.mkdir(parents=True)
        for name, command in commands.items():
            done = subprocess.run(command(out), capture_output=True, text=True)
            if done.returncode != 0:
                raise AssertionError(f"{name}: {done.stderr[-2000:]}")
        outputs[run] = store_files(out)
    for name, prefix in (
        ("grid", "store/points"),
        ("report", "store/report"),
        ("simulate --out", "sim/"),
        ("trace import", "imported"),
    ):
        first = {k: v for k, v in outputs["first"].items() if k.startswith(prefix)}
        second = {k: v for k, v in outputs["second"].items() if k.startswith(prefix)}
        same[name] = bool(first) and first == second
    same["grid"] = same["grid"] and all(
        outputs["first"][k] == outputs["second"][k]
        for k in ("store/grid.csv", "store/grid.json")
        if k in outputs["first"]
    )
    return same


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--workdir", type=Path, help="where the stores go [a temporary folder, removed]")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="grid-faults-"))
    rng = random.Random(args.seed)
    try:
        reference = work / "reference"
        subprocess.run(grid_command(args.trace, reference), check=True, capture_output=True)
        print(
            f"kills: SIGKILL of `grid` ({len(store_files(reference / 'points')) // 3} points, 2 workers) at "
            "random moments:"
        )
        figures = kill_at_random(args.trace, work / "killed", args.kills, rng)
        identical = store_files(work / "killed") == store_files(reference)
        print(
            f"kills {figures['kills']} in {figures['runs']} runs; points kept at each kill "
            f"{figures['points_seen_at_kills']}; workers outliving a kill {figures['orphans']}; stale temporary "
            f"files found after kills {figures['stale_temp_files']}, left at the end {figures['temp_files_at_end']}; "
            f"final store byte-identical to an uninterrupted run: {identical}"
        )
        for after_s in (0.5, 1.5, 3.0):
            result = interrupt(args.trace, work / f"interrupted-{after_s}", after_s)
            print(f"ctrl-c after {after_s} s: {result}")
        result = interrupt(args.trace, work / "terminated", 3.0, signal.SIGTERM)
        print(f"SIGTERM to the grid process alone after 3.0 s: {result}")
        print(f"twice: byte-identical {run_twice(args.trace, work / 'twice')}")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
