"""The entry point behind scripts/gpu_check.sh: the plan, a GPU run, or a CPU dry run of the same stages.

The budgets add up to well under 8 minutes, so one 10-minute device call holds the whole check with room
for the machine's start and the transfers (docs/gpu-runs.md). A stage that overruns its budget is killed
with everything it started and recorded as "timeout"; the next stage runs. The exit status is 0 only if
every stage passed.

    python scripts/gpu_check.py plan | run [--out DIR] | dry-run [--out DIR] [--budget-scale X] [--only a,b]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check_profiles import DRY, GPU  # noqa: E402
from gpu_check_runner import REPO, Context, plan_text, run_stages  # noqa: E402
from gpu_check_stages import STAGES  # noqa: E402


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["plan", "run", "dry-run"])
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"), help="results [$OUT]")
    parser.add_argument(
        "--budget-scale", type=float, help="multiply every budget [the profile's: 1 on the GPU, 6 dry]"
    )
    parser.add_argument("--only", help="comma-separated stage names to run")
    return parser.parse_args()


def main() -> int:
    args = _parse()
    stages = [s for s in STAGES if args.only is None or s.name in args.only.split(",")]
    profile = DRY if args.mode == "dry-run" else GPU
    scale = profile.budget_scale if args.budget_scale is None else args.budget_scale
    print(plan_text(stages, scale), flush=True)
    if args.mode == "plan":
        return 0
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))  # traces and run folders; only results go to --out
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(
            p for p in (str(work / "site"), str(REPO), os.environ.get("PYTHONPATH")) if p
        ),
    )  # site: the wheels
    if profile is DRY:
        env.setdefault("OMP_NUM_THREADS", "1")  # tiny tensors: one thread is ~10x faster on a busy CPU
    ctx = Context(profile, out, work, out / "gpu_check.log", env=env)
    ctx.log_path.write_text("")
    summary = run_stages(stages, ctx, {"mode": args.mode, "profile": profile.name}, scale)
    print(f"{'all stages ok' if summary['ok'] else 'FAILED'}: {out / 'gpu_check.json'}", flush=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
