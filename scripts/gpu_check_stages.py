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
    """Every executor test file but this check's own (it runs this script), in xdist workers if installed."""
    has_xdist = ctx.run("-c", "import importlib.util as u; print(bool(u.find_spec('xdist')))", label="xdist")
    workers = ctx.profile.workers if has_xdist.strip() == "True" else 0
    args = [*ctx.profile.tests, "--ignore=tests/executor/test_executor_gpu_check.py"]
    args += ["-n", str(workers)] if workers else []
    lines = ctx.run("-m", "pytest", *args, label="pytest").strip().splitlines()
    return {"result": lines[-1] if lines else "", "workers": workers}


def _trace(ctx: Context, kind: str = "s1") -> str:
    path = ctx.work / f"{kind}.jsonl"
    if not path.exists():
        args = ctx.profile.trace if kind == "s1" else ctx.profile.multiturn
        ctx.run("cli.py", "trace", "gen", kind, *args, "-o", str(path), label=f"trace gen {kind}")
    return str(path)


def _sim_args(ctx: Context) -> tuple[str, ...]:
    """What `simulate` takes; execute and calibrate take the device too (`_model_args`)."""
    p = ctx.profile
    return ("--model", p.model, "--gpu", p.gpu, *p.knobs)


def _model_args(ctx: Context, knobs: tuple[str, ...] | None = None) -> tuple[str, ...]:
    p = ctx.profile
    return ("--device", p.device, "--model", p.model, "--gpu", p.gpu, *(p.knobs if knobs is None else knobs))


def _kernels(ctx: Context) -> tuple[str, str]:
    return ("--kernels", ctx.profile.kernels)


def _execute(ctx: Context, policy: str, name: str, trace: str = "s1", knobs=None, status: int = 0) -> dict:
    """``status``: the exit status `execute` must end with (1 where a request is not bit-exact)."""
    folder = ctx.work / name
    out = ctx.run(
        "cli.py",
        "execute",
        "--trace",
        _trace(ctx, trace),
        "--policy",
        policy,
        *_kernels(ctx),
        *_model_args(ctx, knobs),
        *ctx.profile.run,
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


def _vllm(ctx: Context) -> dict:
    """vLLM's block manager drives the executor: every reuse on its shared block pool bit-exact."""
    figures = _execute(ctx, "vllm", "vllm", "multiturn", ctx.profile.vllm_knobs)
    if figures["requests_not_bit_exact"] or not figures["requests_reusing"]:
        raise StageFailed("vllm must reuse and be bit-exact on every request", figures)
    return figures


def _calibrate(ctx: Context) -> dict:
    """Fitted on the retain run's measured steps, held out on the vllm run's (another trace): no new run."""
    path = ctx.out / "calibration.json"
    line = ctx.run(
        "cli.py",
        "calibrate",
        "--from-run",
        str(ctx.work / "retain"),
        "--holdout-run",
        str(ctx.work / "vllm"),
        "--model",
        ctx.profile.model,
        "--gpu",
        ctx.profile.gpu,
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


# most valuable first: a call cut short still returns the bit-exactness of what users run on the device. Budgets
# from the first H200 run (2026-12-04, docs/results/gpu-runs.md): retain 51 s, negative 40, vllm 15, throughput 8;
# the tests stage had not finished at 150 s (103 of 140 run, none failed), so it gets what the others did not use.
STAGES = [
    Stage("env", 10, "python, torch, triton, numpy; the GPU torch sees", _env),
    Stage(
        "wheels",
        15,
        "install the carried simpy wheel (dry run: build it from this environment first)",
        _wheels,
    ),
    Stage(
        "retain",
        70,
        "execute sglang-retain on the S1 trace: must reuse and be bit-exact (the warm-up pass JIT-compiles)",
        _retain,
    ),
    Stage(
        "negative",
        50,
        "simulate proves the trace reads freed SWA, then execute broken-retain-short: "
        "not bit-exact on exactly those requests",
        _negative,
    ),
    Stage("vllm", 30, "execute vllm on a multi-turn trace: its block pool's reuse bit-exact", _vllm),
    Stage(
        "calibrate", 10, "fit the retain run's steps, held out on the vllm run's (another trace)", _calibrate
    ),
    Stage("tests", 230, "every executor test file on the device (the tl.dot branch too)", _tests),
    Stage("throughput", 20, "matmul and attention kernels vs torch matmul / SDPA, tokens/s", _throughput),
]
assert sum(s.budget_s for s in STAGES) <= TOTAL_BUDGET_S - 15, "keep a margin under the ceiling"
