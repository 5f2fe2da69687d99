"""hybridcache's command line. Each command parses its options and calls the library; nothing else.

Bad input (a TraceError, a bad option or parameter, an unreadable file) prints one message naming
file:line:field on stderr and exits with status 2; outputs are written atomically, so a failed command
leaves no partial file behind.
"""
from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable

import click

from sim.trace import Trace, load_trace, write_trace
from sim.trace_gen import GENERATORS
from sim.trace_import import import_azure, import_mooncake
from sim.trace_stats import trace_stats


class InputError(click.ClickException):
    """Bad user input: exit status 2, like click's own usage errors."""

    exit_code = 2


def call_library(fn: Callable, *args, **kwargs):
    """Run a library call, turning bad-input exceptions into an InputError."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, OSError) as e:  # TraceError is a ValueError
        raise InputError(str(e)) from e


@click.group()
def cli() -> None:
    """hybridcache: prefix-cache reuse and pool occupancy of hybrid-model serving policies."""


@cli.group()
def trace() -> None:
    """Generate, import and inspect request traces (JSONL, README "Trace format")."""


@trace.group()
def gen() -> None:
    """Generate a trace: fan-out, multi-turn, or one of the seed experiments S1-S3."""


def _option_for(param: inspect.Parameter, hint: object) -> click.Option:
    flag = "--" + param.name.replace("_", "-")
    # click treats an explicit default=None as a default, so a required option gets none at all
    given = {"required": True} if param.default is inspect.Parameter.empty else {"default": param.default}
    if typing.get_origin(hint) is typing.Literal:
        return click.Option([flag], type=click.Choice(typing.get_args(hint)), show_default=True, **given)
    if hint is bool:
        return click.Option([f"{flag}/--no-{flag[2:]}"], show_default=True, **given)
    return click.Option([flag], type=hint, show_default=True, **given)


def _generator_command(name: str, generator: Callable[..., Trace]) -> click.Command:
    """A `trace gen NAME` command whose options are the generator's parameters."""
    hints = typing.get_type_hints(generator)
    params = [_option_for(p, hints[p.name]) for p in inspect.signature(generator).parameters.values()]
    params.append(click.Option(["-o", "--output"], required=True, type=click.Path(dir_okay=False),
                               help="the JSONL trace to write"))

    def run(output: str, **kwargs: object) -> None:
        call_library(write_trace, call_library(generator, **kwargs), output)

    return click.Command(name, params=params, callback=run, help=inspect.getdoc(generator))


for _name, _generator in GENERATORS.items():
    gen.add_command(_generator_command(_name, _generator))


@trace.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(["mooncake", "azure"]))
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="the JSONL trace to write")
@click.option("--limit", type=click.IntRange(min=1), help="import only the first N requests")
@click.option("--prefix-groups", type=int, help="azure: number of shared system prompts [8]")
@click.option("--shared-len", type=int, help="azure: tokens of each shared system prompt [512]")
@click.option("--seed", type=int, help="azure: seed of the group assignment [0]")
def import_(fmt: str, src: str, output: str, limit: int | None, **azure_options: int | None) -> None:
    """Convert a public trace (Mooncake JSONL, Azure LLM CSV) to hybridcache's format."""
    given = {k: v for k, v in azure_options.items() if v is not None}
    if fmt == "mooncake":
        if given:
            raise click.UsageError(f"--{next(iter(given)).replace('_', '-')} applies to azure only")
        imported = call_library(import_mooncake, src, limit=limit)
    else:
        imported = call_library(import_azure, src, limit=limit, **given)
    call_library(write_trace, imported, output)


@trace.command("stats")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print one JSON object instead of a table")
def stats(path: str, as_json: bool) -> None:
    """Sizes, sharing structure and ideal (infinite FULL cache, page 1) reuse of a trace."""
    result = trace_stats(call_library(load_trace, path))
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("statistic", "value", title=path)
    for key, value in result.items():
        table.add_row(key, _format_value(value))
    Console().print(table)


def _format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
    return str(value)


if __name__ == "__main__":
    cli()
