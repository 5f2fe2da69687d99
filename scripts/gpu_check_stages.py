"""The stages of scripts/gpu_check.sh and the two sizes they run at (the GPU's, and a CPU dry run's).

Each stage body runs its commands through `ctx.run` (within the stage's budget), checks what they
printed, and returns the figures for gpu_check.json; a wrong result raises StageFailed with the figures
it did get. docs/gpu-runs.md says what every figure means.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from gpu_check_runner import REPO, TOTAL_BUDGET_S, Context, Stage, StageFailed
from wheel_from_env import build_wheel


def _env(ctx: Context) -> dict:
    code = (
        "import json, platform, numpy, torch, triton; c = torch.cuda.is_available(); print(json.dumps({"
        "'python': platform.python_version(), 'torch': torch.__version__, 'triton': triton.__version__, "
        "'numpy': numpy.__version__, 'cuda': c, 'gpu': torch.cuda.get_device_name() if c else None}))"
    )
    figures = json.loads(ctx.run("-c", code, label="versions").strip().splitlines()[-1])
    if ctx.profile.device == "cuda" and not figures["cuda"]:
        raise StageFailed("torch sees no CUDA device", figures)
    return figures


def _wheels(ctx: Context) -> dict:
    """simpy is the one dependency the GPU image lacks; installed from wheels into a folder of its own."""
    source = REPO / ".whl" if ctx.profile.wheels == "carried" else ctx.work / "whl"
    if ctx.profile.wheels == "build":
        build_wheel("simpy", source)
    wheels = sorted(str(p) for p in source.glob("*.whl"))
    if not any(Path(w).name.startswith("simpy-") for w in wheels):
        raise StageFailed(
            f"no simpy wheel in {source}: run `bash scripts/gpu_check.sh --prepare` before the "
            "device call and carry .whl",
            {"wheels": wheels},
        )
    ctx.run(
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--upgrade",
        "--target",
        str(ctx.work / "site"),
        *wheels,
        label="pip install",
    )
    found = ctx.run(
        "-c", "import simpy; print(simpy.__version__, simpy.__file__)", label="import simpy"
    ).split()
    return {"wheels": [Path(w).name for w in wheels], "simpy": found[0], "simpy_from": found[1]}


def _tests(ctx: Context) -> dict:
    lines = ctx.run("-m", "pytest", *ctx.profile.tests, label="pytest").strip().splitlines()
    return {"result": lines[-1] if lines else ""}


def _trace(ctx: Context) -> str:
    path = ctx.work / "s1.jsonl"
    if not path.exists():
        ctx.run("cli.py", "trace", "gen", "s1", *ctx.profile.trace, "-o", str(path), label="trace gen")
    return str(path)


def _sim_args(ctx: Context) -> tuple[str, ...]:
    """What `simulate` takes; execute and calibrate take the device too (`_model_args`)."""
    p = ctx.profile
    return ("--model", p.model, "--gpu", p.gpu, *p.knobs)


def _model_args(ctx: Context) -> tuple[str, ...]:
    return ("--device", ctx.profile.device, *_sim_args(ctx))


def _kernels(ctx: Context) -> tuple[str, str]:
    return ("--kernels", ctx.profile.kernels)


def _execute(ctx: Context, policy: str, name: str, status: int = 0) -> dict:
    """``status``: the exit status `execute` must end with (1 where a request is not bit-exact)."""
    folder = ctx.work / name
    out = ctx.run(
        "cli.py",
        "execute",
        "--trace",
        _trace(ctx),
        "--policy",
        policy,
        *_kernels(ctx),
        *_model_args(ctx),
        "--format",
        "json",
        "--out",
        str(folder),
        label=f"execute {policy}",
        status=status,
    )
    shutil.copy(folder / "bitwise.csv", ctx.out / f"bitwise_{name}.csv")
    return json.loads(out.strip().splitlines()[-1])


def _retain(ctx: Context) -> dict:
    figures = _execute(ctx, "sglang-retain", "retain")
    if figures["requests_not_bit_exact"] or not figures["requests_reusing"]:
        raise StageFailed("sglang-retain must reuse and be bit-exact on every request", figures)
    return figures


def _relies_on_freed_swa(ctx: Context, policy: str) -> list[str]:
    folder = ctx.work / f"simulate-{policy}"
    ctx.run(
        "cli.py",
        "simulate",
        "--trace",
        _trace(ctx),
        "--policy",
        policy,
        *_sim_args(ctx),
        "--out",
        str(folder),
        "--format",
        "json",
        label=f"simulate {policy}",
    )
    with (folder / "requests.csv").open() as rows:
        return [row["id"] for row in csv.DictReader(rows) if row["relies_on_freed_window"] == "True"]


def _negative(ctx: Context) -> dict:
    relies = _relies_on_freed_swa(ctx, "broken-retain-short")
    if not relies:  # asserted before the run: a control on a trace that never reads freed SWA proves nothing
        raise StageFailed("the trace relies on no freed SWA under broken-retain-short", {"relies": relies})
    figures = dict(_execute(ctx, "broken-retain-short", "broken", status=1), relies_on_freed_swa=relies)
    if sorted(figures["not_bit_exact_ids"]) != sorted(relies):
        raise StageFailed(
            "broken-retain-short must be flagged on exactly the requests simulate says rely on freed SWA",
            figures,
        )
    return figures


def _calibrate(ctx: Context) -> dict:
    path = ctx.out / "calibration.json"
    line = ctx.run(
        "cli.py",
        "calibrate",
        "--trace",
        _trace(ctx),
        "--policy",
        "sglang-retain",
        *_kernels(ctx),
        *_model_args(ctx),
        "-o",
        str(path),
        label="calibrate",
    ).strip()
    return dict(json.loads(path.read_text()), line=line)


def _throughput(ctx: Context) -> dict:
    path = ctx.out / "throughput.json"
    ctx.run(
        "benchmarks/executor_kernels.py", *ctx.profile.bench, "--json", str(path), label="kernel benchmark"
    )
    keep = ("kernel", "shape", "ours_tokens_per_s", "torch_tokens_per_s", "slowdown", "max_abs_diff")
    return {"rows": [{k: row[k] for k in keep} for row in json.loads(path.read_text())["rows"]]}


STAGES = [
    Stage("env", 15, "python, torch, triton, numpy; the GPU torch sees", _env),
    Stage(
        "wheels",
        15,
        "install the carried simpy wheel (dry run: build it from this environment first)",
        _wheels,
    ),
    Stage(
        "tests",
        150,
        "the executor's kernel and bit-exactness tests on the device (the tl.dot branch too)",
        _tests,
    ),
    Stage(
        "retain",
        90,
        "execute sglang-retain on the S1 trace: must reuse and be bit-exact (JIT compiles here)",
        _retain,
    ),
    Stage(
        "negative",
        60,
        "simulate proves the trace reads freed SWA, then execute broken-retain-short: "
        "not bit-exact on exactly those requests",
        _negative,
    ),
    Stage("calibrate", 50, "fit the step-time model: in-sample and held-out MAPE", _calibrate),
    Stage("throughput", 70, "matmul and attention kernels vs torch matmul / SDPA, tokens/s", _throughput),
]
assert sum(s.budget_s for s in STAGES) <= TOTAL_BUDGET_S - 30, "keep a margin under the 8-minute ceiling"
