"""The options `execute` and `calibrate` share: the trace, policy, model and how it runs, and the config they
make (a policy the executor cannot run is refused here, while the options are parsed)."""

from __future__ import annotations

import click

from commands.common import POLICY_HELP, config_from_options
from commands.options import TRACE_INPUT, PolicyChoice, option, pool_options, spec_options
from commands.param_types import Integer
from sim.cost import GPUS
from sim.engines.registry import CLI_KNOBS, ENGINES
from sim.models import MODELS

# the executor's own pool defaults: small enough for a shrunk model's tensors on a CPU
EXECUTOR_POOLS = {"pool_tokens": 200_000, "mamba_states": 256}


def executor_options(fn):
    options = [
        option(
            "--trace",
            "trace_path",
            type=TRACE_INPUT,
            show_default="required (calibrate: unless --from-run)",
            help="the JSONL trace (plain, gzip or zstd; - for standard input)",
        ),
        option(
            "--policy",
            default="sglang-retain",
            show_default=True,
            type=PolicyChoice(),
            help=POLICY_HELP,
        ),
        option(
            "--model",
            default="tiny",
            show_default=True,
            type=click.Choice(list(MODELS)),
            help="the model preset: its real layer pattern, with random weights (the cache manager always runs it at full size)",
        ),
        option(
            "--shrink",
            default="auto",
            show_default=True,
            type=click.Choice(["auto", "none"]),
            help="auto: on a CPU the network shrinks by the rule in docs/executor.md, keeping every property the cache depends on; none: full size",
        ),
        option(
            "--device",
            default="cpu",
            show_default=True,
            type=click.Choice(["cpu", "cuda"]),
            help="where the model runs (cpu: Triton under its interpreter)",
        ),
        option(
            "--kernels",
            default="triton",
            show_default=True,
            type=click.Choice(["triton", "torch"]),
            help="the Triton kernels or their plain-torch references",
        ),
        option(
            "--warmup",
            default="auto",
            show_default=True,
            type=click.Choice(["auto", "full", "none"]),
            help="full: run the schedule once untimed first, so every kernel variant is compiled before timing; auto: full on cuda, none on cpu (the interpreter compiles nothing)",
        ),
        option(
            "--gpu",
            type=click.Choice(sorted(GPUS)),
            show_default="cpu on cpu, h200 on cuda",
            help="the cost model's preset the measured times are set beside",
        ),
        option(
            "--seed",
            default=0,
            show_default=True,
            type=Integer(0, 2**63 - 1),
            help="seed of the model's random weights",
        ),
    ]
    for decorate in reversed(options):
        fn = decorate(fn)
    return fn


def executor_knobs(fn):
    """The pool options and the knobs of the engines ``execute`` runs, listed after every other option."""
    executable = {name for name, engine in ENGINES.items() if engine.executes is None}
    specs = {
        name: spec
        for name, spec in CLI_KNOBS.items()
        if spec.engines is None or set(spec.engines) & executable
    }
    return spec_options(specs, preset_default=True)(pool_options(**EXECUTOR_POOLS)(fn))


def executor_config(policy, model, device, gpu, calibration, options):
    import os

    from executor.support import execute_refusal
    from sim.run.setup import build
    from sim.run.simulate import SimConfig

    if device == "cpu":  # the Triton kernels run under the interpreter; it must be on before they load
        os.environ.setdefault("TRITON_INTERPRET", "1")
    config = SimConfig(
        policy=policy,
        model=model,
        gpu=gpu or ("cpu" if device == "cpu" else "h200"),
        calibration=calibration,
        **config_from_options(options),
    )
    refusal = execute_refusal(build(config).policy)  # refused here, before anything runs
    if refusal is not None:
        raise ValueError(f"--policy {policy}: {refusal}")
    return config


def run_options(device, kernels, seed, shrink, warmup) -> dict:
    return dict(device=device, kernels=kernels, seed=seed, shrink=shrink, warmup=warmup)


def executor_module(name: str):
    """``executor.<name>``, or a clear error where the executor's stack (torch, triton) is not installed."""
    import importlib

    from commands.options import InputError

    try:
        return importlib.import_module(f"executor.{name}")
    except ModuleNotFoundError as err:
        if err.name not in ("torch", "triton"):
            raise
        raise InputError(
            f"the executor needs {err.name}, which is not installed: pip install -c constraints-cpu.txt "
            "-e '.[executor]' (a GPU machine brings its own torch)"
        ) from None
