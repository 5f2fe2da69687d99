"""The two sizes scripts/gpu_check.sh runs at: the GPU's, and a CPU dry run's (the tests, trace, model and
policies of each)."""

from __future__ import annotations

from dataclasses import dataclass

KERNEL_TESTS = tuple(
    f"tests/executor/test_executor_{name}.py"
    for name in (
        "dot_branch",
        "dense_kernels",
        "attention",
        "mamba_kernels",
        "model_exact",
        "bitwise",
        "negative_controls",
    )
)


PYTEST = ("-p", "no:cacheprovider", "-q", "-rfE", "--durations=8")


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    device: str
    kernels: str  # the dry run takes the torch references: the interpreter is slow, and tests cover it
    gpu: str  # the cost preset the prediction uses
    trace: tuple[str, ...]  # `cli.py trace gen s1` arguments
    knobs: tuple[str, ...]  # policy knobs and pool sizes, for simulate, execute and calibrate alike
    tests: tuple[str, ...]  # pytest arguments
    bench: tuple[str, ...]  # benchmarks/executor_kernels.py arguments
    wheels: str  # "carried": install .whl/*.whl; "build": build them here first (the prepare step)


# 4 prompts of 1500 tokens + 700 outputs: every second turn hits the 2048 decode checkpoint, and with the
# window one page short (broken-retain-short) all four read SWA the policy freed (600 outputs: none do).
# The tests run in 4 pytest-xdist workers (in the GPU image): Triton's JIT compiles dominate, one per variant.
GPU = Profile(
    "gpu",
    "small",
    "cuda",
    "triton",
    "h200",
    ("--num-prompts", "4", "--prompt-len", "1500", "--output-len", "700"),
    (
        "--page-size",
        "64",
        "--track-interval",
        "256",
        "--swa-eviction-interval",
        "128",
        "--pool-tokens",
        "400000",
        "--mamba-states",
        "512",
    ),
    (*KERNEL_TESTS, *PYTEST, "-n", "4"),
    ("--model", "small", "--device", "cuda"),
    "carried",
)


# the same stages at sizes a CPU runs in seconds: the tiny model with a 16-token window
DRY = Profile(
    "dry-run",
    "tiny",
    "cpu",
    "torch",
    "cpu",
    ("--num-prompts", "2", "--prompt-len", "30", "--output-len", "8"),
    (
        "--page-size",
        "4",
        "--track-interval",
        "8",
        "--swa-eviction-interval",
        "4",
        "--window",
        "16",
        "--pool-tokens",
        "20000",
        "--mamba-states",
        "64",
    ),
    ("tests/executor/test_executor_dot_branch.py", "-k", "matmul", *PYTEST),
    ("--model", "tiny", "--device", "cpu", "--prefill", "32", "--batch", "2", "--context", "40"),
    "build",
)
