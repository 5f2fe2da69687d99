"""`grid` and `report`: a sweep over knob combinations, one stored result per point, and its report."""

from __future__ import annotations

from pathlib import Path

import click

from commands.common import CALIBRATION_HELP, MODE_HELP, SLO_HELP
from commands.interrupts import Interrupted, interrupt_on_sigterm, signal_of
from commands.options import (
    TRACE_INPUT,
    call_library,
    option,
)
from commands.param_types import Integer, OutputDir
from commands.preflight import require_table_format, writable_dir
from sim.grid.axes import MAX_POINTS
from sim.trace import load_trace


def _grid_axis_options(fn):
    """One comma-list option per grid axis: every simulate knob and pool option (sim/grid/axes.py)."""
    from sim.grid.axes import AXES

    for axis in reversed(AXES):
        fn = option(
            axis.flag,
            axis.name,
            metavar="V1,V2,..",
            show_default=axis.default_text,
            help=f"{axis.help}; a comma list",
        )(fn)
    return fn


@click.command()
@option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    show_default="none",
    help="a TOML grid file: axes as lists (page_size = [64, 128]) and trace, out, mode, calibration, slo, "
    "jobs; options given here add to it (an axis in both is an error)",
)
@option(
    "--trace",
    "trace_path",
    type=TRACE_INPUT,
    show_default="the grid file's",
    help="the JSONL trace every point simulates",
)
@_grid_axis_options
@option("--mode", type=click.Choice(["timed", "replay"]), show_default="timed", help=MODE_HELP)
@option(
    "--calibration", type=click.Path(exists=True, dir_okay=False), show_default="none", help=CALIBRATION_HELP
)
@option("--slo", metavar="ttft=S,tpot=S", show_default="the grid file's, else none", help=SLO_HELP)
@option(
    "--out",
    "out_dir",
    type=OutputDir(),
    show_default="the grid file's",
    help="the result store (points/, failed/, grid.csv)",
)
@option(
    "--jobs",
    type=Integer(min=1),
    show_default="one per core",
    help="worker processes, or a private Ray's CPUs",
)
@option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    metavar="[ADDRESS]",
    show_default="no Ray",
    help="run points as Ray tasks on the cluster at ADDRESS (no address: a private local Ray)",
)
@option(
    "--max-points",
    type=Integer(min=1),
    show_default=f"{MAX_POINTS:,}, or the grid file's",
    help="refuse a grid of more points than this (its size is announced before any work): a longer grid "
    "is likelier a slip in a list than a plan",
)
@option(
    "--keep-old",
    is_flag=True,
    default=False,
    show_default=True,
    help="keep points an older code computed for the same inputs instead of recomputing them "
    "(report warns about the mix)",
)
@option(
    "--table-format",
    default="csv",
    show_default=True,
    type=click.Choice(["csv", "parquet"]),
    help="grid.csv, and with parquet also grid.parquet (needs pyarrow)",
)
@click.pass_context
def grid(
    ctx,
    config_path,
    trace_path,
    mode,
    calibration,
    slo,
    out_dir,
    jobs,
    ray_address,
    keep_old,
    table_format,
    max_points,
    **axis_texts,
):
    """Simulate every combination of the comma-list knobs, one stored result per point; a rerun skips
    finished points computed by the same code (a code change recomputes them). Exit status 1 when some
    point failed (each is printed with its configuration)."""
    from sim.grid.config_file import merge_grid_file
    from sim.grid.store import check_store_dir
    from sim.grid.sweep import describe_interrupted, describe_run, run_grid
    from sim.trace.files import STDIN, save_stdin

    given = {
        "trace": trace_path,
        "out": out_dir,
        "mode": mode,
        "calibration": calibration,
        "jobs": jobs,
        "max_points": max_points,
        "slo": slo,
    }
    settings, axis_texts = call_library(merge_grid_file, config_path, given, axis_texts)
    call_library(require_table_format, table_format)  # now, not after the whole sweep
    call_library(check_store_dir, settings["out"])
    call_library(writable_dir, settings["out"], "--out")
    configs = _configs(settings, axis_texts)
    trace_path = settings["trace"]
    if trace_path == STDIN:  # the workers read the trace by path: keep a copy in the store
        trace_path = call_library(save_stdin, settings["out"], check=load_trace)
    with interrupt_on_sigterm():
        try:
            run = call_library(
                run_grid,
                trace_path,
                configs,
                settings["out"],
                settings["jobs"],
                ray_address,
                keep_old=keep_old,
            )
        except KeyboardInterrupt as e:
            raise Interrupted(describe_interrupted(settings["out"]), signal_of(e)) from None
    if table_format == "parquet":
        from sim.run.tables_io import write_table

        call_library(write_table, run.table, Path(settings["out"]) / "grid", "parquet")
    click.echo(describe_run(run))
    ctx.exit(1 if run.failed else 0)


def _configs(settings: dict, axis_texts: dict) -> list:
    """The grid's points, its size announced (on stderr) before they are built, and refused past the limit."""
    from sim.grid.axes import expand, grid_size, parse_axes

    axes = call_library(parse_axes, axis_texts)
    limit = settings["max_points"] or MAX_POINTS
    click.echo(f"grid: {grid_size(axes)[1]} (at most {limit:,}: --max-points)", err=True)
    return call_library(expand, axes, settings["calibration"], settings["mode"], limit, settings["slo"])


@click.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@option("--baseline", show_default="the grid's first policy", help="the policy every other is compared with")
@option(
    "--format",
    "fmt",
    default="md",
    show_default=True,
    type=click.Choice(["md", "html", "png"]),
    help="md: DIR/report.md + figures/*.png; html: one self-contained DIR/report.html; png: figures",
)
@option(
    "--points",
    metavar="KEY,..",
    show_default="the baseline's and one other policy's first point",
    help="points whose pool occupancy is drawn (keys or unique prefixes)",
)
def report(out_dir, baseline, fmt, points):
    """Heatmaps, pool occupancy, cost of retention and seed-style tables of a `grid` sweep in DIR."""
    from reports.report import write_report

    chosen = [p.strip() for p in points.split(",")] if points is not None else None
    call_library(writable_dir, out_dir, "DIR")
    written = call_library(write_report, out_dir, baseline, fmt, chosen)
    for warning in written.warnings:
        click.echo(f"warning: {warning}", err=True)
    for path in written.paths:
        click.echo(f"wrote {path}")
