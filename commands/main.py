"""hybridcache's command line. Each command parses its options and calls the library; nothing else.

Bad input (a TraceError, a bad option or parameter, an unreadable file) prints one message naming
file:line:field on stderr and exits with status 2; outputs are written atomically, so a failed command
leaves no partial file behind. Every option's help and default come from what it configures (the knob
schema for knobs and pools: ``commands/options.py``). One module per group of commands: ``simulate``
(simulate, experiment), ``grid`` (grid, report), ``engines`` (policies, conformance), ``execute`` (execute,
calibrate), ``trace`` (gen, import, stats).
"""

from __future__ import annotations

import click

from commands.engines import conformance, policies
from commands.execute import calibrate, execute
from commands.grid import grid, report
from commands.interrupts import InterruptibleGroup
from commands.options import option
from commands.simulate import experiment, simulate
from commands.trace import trace


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from sim.code_version import code_identity, describe_code

    click.echo(f"hybridcache {describe_code(code_identity())}")
    ctx.exit()


@click.group(cls=InterruptibleGroup)
@option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="print the version, the source hash and git's description of this checkout, then exit",
)
def cli() -> None:
    """hybridcache: prefix-cache reuse and pool occupancy of hybrid-model serving policies."""


for command in (simulate, experiment, grid, report, policies, conformance, execute, calibrate, trace):
    cli.add_command(command)
