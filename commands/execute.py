"""`execute` and `calibrate`: the real Triton executor driven by the simulator's policy."""

from __future__ import annotations

import click

from commands.common import CALIBRATION_HELP, knob_option_names
from commands.execute_options import (
    executor_config,
    executor_knobs,
    executor_module,
    executor_options,
    run_options,
)
from commands.options import InputError, call_library, call_with_options, format_option, option
from commands.param_types import OutputDir, OutputFile
from commands.preflight import require_table_format
from sim.trace import load_trace


@click.command()
@executor_options
@option(
    "--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none", help=CALIBRATION_HELP
)
@option(
    "--out",
    "out_dir",
    type=OutputDir(),
    show_default="nothing written",
    help="write requests, steps (predicted_* and measured_* times), summary.json, bitwise.csv and timings.csv here",
)
@option(
    "--table-format",
    default="csv",
    show_default=True,
    type=click.Choice(["csv", "parquet"]),
    help="the request and step tables --out writes",
)
@format_option(("text", "json"))
@executor_knobs
@click.pass_context
def execute(
    ctx,
    trace_path,
    policy,
    model,
    shrink,
    device,
    kernels,
    warmup,
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
    vs predicted step and request times, throughput. Exit status 1 when any request is not bit-exact (as
    `conformance` exits 1 when any request disagrees), 2 on bad input."""
    if trace_path is None:
        raise InputError("execute needs --trace")
    if out_dir is not None:
        call_library(require_table_format, table_format)  # now, not after the run
    config = call_with_options(
        knob_option_names(), executor_config, policy, model, device, gpu, calibration, options
    )
    loaded = call_library(load_trace, trace_path)
    execute_report = executor_module("report").execute_report

    run = run_options(device, kernels, seed, shrink, warmup)
    report = call_with_options(
        knob_option_names(), execute_report, loaded, config, run, out_dir, fmt == "json", table_format
    )
    click.echo(report.text)
    ctx.exit(1 if report.num_not_bit_exact else 0)


@click.command()
@executor_options
@option(
    "--holdout-trace",
    show_default="none: no held-out figure",
    type=click.Path(exists=True, dir_okay=False),
    help="a different trace, executed the same way: the fit's error on its steps is the held-out figure",
)
@option(
    "--from-run",
    show_default="execute --trace",
    type=click.Path(exists=True, file_okay=False),
    help="fit the steps an `execute --out` folder recorded instead of executing --trace",
)
@option(
    "--holdout-run",
    show_default="none",
    type=click.Path(exists=True, file_okay=False),
    help="the held-out steps from an `execute --out` folder of a different trace",
)
@option("-o", "--output", required=True, type=OutputFile(), help="the calibration JSON to write")
@executor_knobs
def calibrate(
    trace_path,
    policy,
    model,
    shrink,
    device,
    kernels,
    warmup,
    gpu,
    seed,
    holdout_trace,
    from_run,
    holdout_run,
    output,
    **options,
):
    """Fit the cost model's coefficients to the executor's measured step times, and report their error on a
    different trace's run; `simulate --calibration` and `execute --calibration` read the file."""
    module = executor_module("calibrate")
    fit, executed_samples, run_samples = module.calibrate, module.executed_samples, module.run_samples

    config = call_with_options(
        knob_option_names(), executor_config, policy, model, device, gpu, None, options
    )
    run = run_options(device, kernels, seed, shrink, warmup)
    if from_run is None and trace_path is None:
        raise InputError("calibrate needs --trace (to execute) or --from-run (an execute --out folder)")
    if from_run:
        samples = call_library(run_samples, from_run)
    else:
        samples = call_library(executed_samples, call_library(load_trace, trace_path), config, run)
    held_out, name = None, ""
    if holdout_run:
        held_out, name = call_library(run_samples, holdout_run), holdout_run
    elif holdout_trace:
        held_out = call_library(executed_samples, call_library(load_trace, holdout_trace), config, run)
        name = holdout_trace
    click.echo(call_library(fit, samples, held_out, name, config, output))
