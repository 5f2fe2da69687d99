"""Stages with time budgets: each stage's commands killed at its budget, the summary JSON rewritten after
every stage (so whatever finished is on disk even if the whole call is cut short)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpu_check_profiles import Profile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from sim.atomic import atomic_write  # noqa: E402  (the repo, not an installed package, on the GPU machine)

TOTAL_BUDGET_S = 450  # the ceiling: one try, inside a 600 s device call that also starts the machine


class StageFailed(Exception):
    """A stage ran but its result is wrong (or its command failed); `figures` keeps what it measured."""

    def __init__(self, message: str, figures: dict | None = None):
        super().__init__(message)
        self.figures = figures or {}


class StageTimeout(StageFailed):
    pass


@dataclass(frozen=True)
class Stage:
    name: str
    budget_s: int
    what: str  # one line for the plan and docs/gpu-runs.md
    body: Callable[["Context"], dict]


@dataclass
class Context:
    """What a stage body gets: the profile, where to write, and `run` for its commands."""

    profile: Profile
    out: Path
    work: Path
    log_path: Path
    deadline: float = 0.0
    env: dict = field(default_factory=dict)

    def run(self, *args: str, label: str, status: int = 0) -> str:
        """Run `python args...` from the repository root within the stage's time; returns its stdout. Any
        exit status but ``status`` fails the stage (a negative control's `execute` must exit 1)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise StageTimeout(f"{label}: no time left in the stage's budget")
        cmd = [sys.executable, *args]
        with self.log_path.open("a") as log:
            log.write(f"\n$ {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(
                cmd,
                cwd=REPO,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )  # its own group: a timeout kills its children too
            try:
                stdout, _ = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, _ = proc.communicate()
                log.write(stdout or "")
                raise StageTimeout(f"{label}: killed at the stage's budget") from None
            log.write(stdout)
        if proc.returncode != status:
            raise StageFailed(f"{label}: exit status {proc.returncode}, not {status} (see gpu_check.log)")
        return stdout


def plan_text(stages: list[Stage], scale: float = 1.0) -> str:
    lines = [f"{'stage':<12} {'budget':>7}  what"]
    lines += [f"{s.name:<12} {s.budget_s * scale:>6.0f}s  {s.what}" for s in stages]
    lines.append(
        f"{'total':<12} {sum(s.budget_s for s in stages) * scale:>6.0f}s  (ceiling {TOTAL_BUDGET_S * scale:.0f} s)"
    )
    return "\n".join(lines)


def _write_json(path: Path, summary: dict) -> None:
    # the project's one atomic writer: never a half-written file, even if the call is cut off here
    atomic_write(path, json.dumps(summary, indent=1, allow_nan=True) + "\n")


def run_stages(stages: list[Stage], ctx: Context, summary: dict, scale: float = 1.0) -> dict:
    """Run every stage in order; the summary JSON is rewritten after each one."""
    summary.update(stages=[], ok=None)
    began = time.monotonic()
    for stage in stages:
        started = time.monotonic()
        ctx.deadline = started + stage.budget_s * scale
        record = {"name": stage.name, "budget_s": stage.budget_s * scale, "status": "ok", "figures": {}}
        try:
            record["figures"] = stage.body(ctx)
        except StageFailed as err:
            record.update(
                status="timeout" if isinstance(err, StageTimeout) else "failed",
                error=str(err),
                figures=err.figures,
            )
        except Exception as err:  # a bug in a stage body must not cost the later stages
            record.update(status="failed", error=f"{type(err).__name__}: {err}")
        record["seconds"] = round(time.monotonic() - started, 2)
        summary["stages"].append(record)
        summary["elapsed_s"] = round(time.monotonic() - began, 2)
        _write_json(ctx.out / "gpu_check.json", summary)
        print(
            f"[{record['status']:>7}] {stage.name:<12} {record['seconds']:7.1f}s / {record['budget_s']:.0f}s"
            + (f"  {record['error']}" if "error" in record else ""),
            flush=True,
        )
    summary["ok"] = all(r["status"] == "ok" for r in summary["stages"])
    _write_json(ctx.out / "gpu_check.json", summary)
    return summary
