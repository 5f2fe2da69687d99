"""`execute` and `calibrate`: the real Triton executor driven by the simulator's policy."""

from __future__ import annotations

import click

from commands.common import CALIBRATION_HELP, POLICY_HELP, config_from_options
from commands.options import (
    TRACE_INPUT,
    PolicyChoice,
    call_library,
    format_option,
    option,
    pool_options,
    spec_options,
)
from commands.preflight import require_table_format, writable_dir, writable_file
from sim.cost import GPUS
from sim.engines.registry import CLI_KNOBS, ENGINES
from sim.trace import load_trace

# the executor's own pool defaults: small enough for the tiny model's tensors on a CPU
EXECUTOR_POOLS = {"pool_tokens": 200_000, "mamba_states": 256}


def _executor_options(fn):
    options = [
        option(
            "--trace",
            "trace_path",
            required=True,
            type=TRACE_INPUT,
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
            type=click.Choice(["tiny", "tiny-swa", "small"]),
            help="the executor's model: tiny and tiny-swa for a CPU, small for a GPU",
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
            "--gpu",
            type=click.Choice(sorted(GPUS)),
            show_default="cpu on cpu, h200 on cuda",
            help="the cost model's preset the measured times are set beside",
        ),
        option(
            "--seed",
            default=0,
            show_default=True,
            type=click.IntRange(0, 2**63 - 1),
            help="seed of the model's random weights",
        ),
    ]
    for decorate in reversed(options):
        fn = decorate(fn)
    return fn


def _executor_knobs(fn):
    """The pool options and the knobs of the engines ``execute`` runs, listed after every other option (a
    knob only vLLM reads is not offered: vLLM's cache does not execute)."""
    executable = {name for name, engine in ENGINES.items() if engine.executes is None}
    specs = {
        name: spec
        for name, spec in CLI_KNOBS.items()
        if spec.engines is None or set(spec.engines) & executable
    }
    return spec_options(specs, preset_default=True)(pool_options(**EXECUTOR_POOLS)(fn))


def _executor_config(policy, model, device, gpu, calibration, options):
    import os

    from sim.run.simulate import SimConfig

    if device == "cpu":  # the Triton kernels run under the interpreter; it must be on before they load
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return SimConfig(
        policy=policy,
        model=model,
        gpu=gpu or ("cpu" if device == "cpu" else "h200"),
        calibration=calibration,
        **config_from_options(options),
    )


@click.command()
@_executor_options
@option(
    "--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none", help=CALIBRATION_HELP
)
@option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    show_default="nothing written",
    help="write requests, steps, bitwise.csv and timings.csv here",
)
@option(
    "--table-format",
    default="csv",
    show_default=True,
    type=click.Choice(["csv", "parquet"]),
    help="the request and step tables --out writes",
)
@format_option(("text", "json"))
@_executor_knobs
@click.pass_context
def execute(
    ctx,
    trace_path,
    policy,
    model,
    device,
    kernels,
    gpu,
    seed,
    calibration,
    out_dir,
    table_format,
    fmt,
    **options,
):
    """Run a trace through the real executor beside the simulator's prediction: every request's outputs
    against a replay from scratch, bit for bit (0 requests not bit-exact for a correct policy), measured
    vs predicted step time, throughput. Exit status 1 when any request is not bit-exact (as `conformance`
    exits 1 when any request disagrees), 2 on bad input."""
    if out_dir is not None:
        call_library(require_table_format, table_format)
        call_library(writable_dir, out_dir, "--out")
    config = call_library(_executor_config, policy, model, device, gpu, calibration, options)
    loaded = call_library(load_trace, trace_path)
    from executor.report import execute_report

    report = call_library(
        execute_report, loaded, config, device, kernels, seed, out_dir, fmt == "json", table_format
    )
    click.echo(report.text)
    ctx.exit(1 if report.num_not_bit_exact else 0)


@click.command()
@_executor_options
@option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="the calibration JSON to write"
)
@_executor_knobs
def calibrate(trace_path, policy, model, device, kernels, gpu, seed, output, **options):
    """Fit the cost model's coefficients to the executor's measured step times; `simulate --calibration`
    and `execute --calibration` read the file."""
    call_library(writable_file, output, "--output")
    config = call_library(_executor_config, policy, model, device, gpu, None, options)
    loaded = call_library(load_trace, trace_path)
    from executor.report import calibrate_from_run

    click.echo(call_library(calibrate_from_run, loaded, config, device, kernels, seed, output))
