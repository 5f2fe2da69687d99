"""The two sizes scripts/gpu_check.sh runs at: the GPU's, and a CPU dry run's (the tests, traces, model and
policies of each). The dry run runs what the device runs: the same model preset (shrunk on the CPU by
executor/shrink.py), the Triton kernels inside `execute` (under the interpreter), every executor test file
(in pytest-xdist workers where the plugin is installed), and the warm-up pass."""

from __future__ import annotations

from dataclasses import dataclass

# every executor test file: the default selection (slow ones are left to `-m slow`)
EXECUTOR_TESTS = ("tests/executor",)

# -v: a line per test as it ends, so a stage killed at its budget still logs which tests passed and failed (the
# first H200 run's was killed with two failures and only dots to show for them)
PYTEST = ("-p", "no:cacheprovider", "-v", "-rfE", "--durations=8")


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    device: str
    kernels: str
    gpu: str  # the cost preset the prediction uses
    trace: tuple[str, ...]  # `cli.py trace gen s1` arguments (retain, negative)
    multiturn: tuple[str, ...]  # `cli.py trace gen multiturn` arguments (vllm; calibrate's held-out trace)
    knobs: tuple[str, ...]  # policy knobs and pool sizes, for simulate and execute alike (SGLang's)
    vllm_knobs: tuple[str, ...]  # vLLM's pool
    run: tuple[str, ...]  # how execute runs (the warm-up pass)
    tests: tuple[str, ...]  # pytest arguments
    workers: int  # pytest-xdist workers (0: none)
    bench: tuple[str, ...]  # benchmarks/executor_kernels.py arguments
    wheels: str  # "carried": install .whl/*.whl; "build": build them here first (the prepare step)
    budget_scale: float  # the stage budgets are the device's; the interpreter on a CPU gets this many times


# 4 prompts of 1500 tokens + 700 outputs: every second turn hits the 2048 decode checkpoint, and with the
# window one page short (broken-retain-short) all four read SWA the policy freed (600 outputs: none do).
# The multi-turn trace's prompts pass vLLM's 272-token block of `small` several times over.
GPU = Profile(
    "gpu",
    "small",
    "cuda",
    "triton",
    "h200",
    ("--num-prompts", "4", "--prompt-len", "1500", "--output-len", "700"),
    (
        "--num-sessions",
        "4",
        "--num-turns",
        "2",
        "--system-len",
        "1500",
        "--user-len",
        "64",
        "--output-len",
        "64",
    ),
    ("--page-size", "64", "--track-interval", "256", "--swa-eviction-interval", "128")
    + ("--pool-tokens", "400000", "--mamba-states", "512"),
    ("--pool-tokens", "400000"),
    ("--warmup", "full"),
    (*EXECUTOR_TESTS, *PYTEST),
    4,
    ("--model", "small", "--device", "cuda"),
    "carried",
    1.0,
)


# the same stages at sizes a CPU runs in minutes: `small` shrunk, a 32-token window, page 16
DRY = Profile(
    "dry-run",
    "small",
    "cpu",
    "triton",
    "cpu",
    ("--num-prompts", "2", "--prompt-len", "100", "--output-len", "60"),
    (
        "--num-sessions",
        "2",
        "--num-turns",
        "2",
        "--system-len",
        "300",
        "--user-len",
        "8",
        "--output-len",
        "4",
    ),
    ("--page-size", "16", "--track-interval", "32", "--swa-eviction-interval", "16", "--window", "32")
    + ("--pool-tokens", "20000", "--mamba-states", "64"),
    ("--window", "32", "--pool-tokens", "20000"),
    ("--warmup", "full"),
    (*EXECUTOR_TESTS, *PYTEST),
    2,
    ("--model", "tiny", "--device", "cpu", "--prefill", "32", "--batch", "2", "--context", "40"),
    "build",
    6.0,
)
