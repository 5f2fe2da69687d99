"""``cli.py trace``: generate, import and inspect traces; each command says what it wrote."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable

import click

from commands.options import TRACE_INPUT, DescribedOption, call_library, call_with_options, format_option
from commands.param_types import Integer, OutputFile
from sim.trace import Trace, load_trace, write_trace
from sim.trace.formats import IMPORT_FORMATS
from sim.trace.generate import GENERATORS
from sim.trace.stats import trace_stats


@click.group()
def trace() -> None:
    """Generate, import and inspect request traces (JSONL, README "Trace format")."""


@trace.group()
def gen() -> None:
    """Generate a trace: fan-out, multi-turn, or one of the seed experiments S1-S3."""


def _wrote(trace_: Trace, output: str) -> str:
    prompt = sum(trace_.prompt_len(r.id) for r in trace_)
    return f"wrote {output}: {len(trace_):,} requests, {prompt:,} prompt tokens"


def _generator_command(name: str, generator: Callable[..., Trace]) -> click.Command:
    """A `trace gen NAME` command whose options are the generator's parameters."""
    from commands.trace_options import generator_params

    params = generator_params(generator)
    params.append(
        DescribedOption(
            ["-o", "--output"],
            required=True,
            type=OutputFile(),
            help="the JSONL trace to write",
        )
    )

    def run(output: str, **kwargs: object) -> None:
        made = call_with_options(kwargs, generator, **kwargs)
        call_library(write_trace, made, output)
        click.echo(_wrote(made, output))

    return click.Command(name, params=params, callback=run, help=inspect.getdoc(generator))


for _name, _generator in GENERATORS.items():
    gen.add_command(_generator_command(_name, _generator))


@trace.group("import")
def import_() -> None:
    """Convert a public trace or benchmark dataset to hybridcache's format and say what it holds. SRC may be
    gzip or zstd, or - for standard input; each format takes only its own options (FORMAT --help)."""


def _import_command(fmt: str, about: str) -> click.Command:
    from commands.trace_import import FORMAT_OPTIONS
    from commands.trace_options import import_params

    params = [
        click.Argument(["src"], type=TRACE_INPUT),
        DescribedOption(
            ["-o", "--output"],
            required=True,
            type=OutputFile(),
            help="the JSONL trace to write",
        ),
        DescribedOption(
            ["--limit"],
            type=Integer(min=1),
            show_default="all",
            help="import only the first N requests (conversations)",
        ),
        *import_params(fmt, FORMAT_OPTIONS[fmt]),
    ]

    def run(src: str, output: str, limit: int | None, **options) -> None:
        from commands.trace_import import run_import

        click.echo(call_with_options(options, run_import, fmt, src, output, limit, options))
        click.echo(f"wrote {output}")

    return click.Command(fmt, params=params, callback=run, help=f"Import {about}.")


for _fmt, _about in IMPORT_FORMATS.items():
    import_.add_command(_import_command(_fmt, _about))


@trace.command("stats")
@click.argument("path", type=TRACE_INPUT)
@format_option(what="the statistics are")
def stats(path: str, fmt: str) -> None:
    """Sizes, sharing structure and ideal (infinite FULL cache, page 1) reuse of a trace."""
    result = trace_stats(call_library(load_trace, path))
    if fmt == "json":
        click.echo(json.dumps(result))
        return
    if fmt == "md":
        click.echo("| statistic | value |\n|:---|---:|")
        for key, value in result.items():
            click.echo(f"| {key} | {_format_value(value)} |")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("statistic", "value", title=escape(path))  # a file name is not rich markup
    for key, value in result.items():
        table.add_row(key, _format_value(value))
    Console().print(table)


def _format_value(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    return str(value)
