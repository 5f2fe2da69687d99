"""Ctrl-C and SIGTERM at the command line: one line and the signal's exit status (130, 143), never a
traceback nor click's "Aborted!" (exit 1). Outputs are written atomically, so an interrupted command leaves
nothing partial; `grid` says which points it kept."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import click


class Interrupted(click.ClickException):
    """Ctrl-C or SIGTERM: what was finished is kept; the shell's status for the signal (128 + its number)."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        # click declares exit_code on the class, but reads it from the instance: each signal has its own
        self.exit_code = 128 + signum  # type: ignore[misc]

    def show(self, file=None) -> None:
        click.echo(f"interrupted: {self.message}", err=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it stops as it does on Ctrl-C."""


def signal_of(interrupt: KeyboardInterrupt) -> int:
    return signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT


@contextlib.contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM stops a long command as Ctrl-C does: workers stopped, temporary files removed."""

    def interrupt(signum, frame):
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class InterruptibleGroup(click.Group):
    """A command group whose every command turns Ctrl-C and SIGTERM into ``Interrupted``."""

    def invoke(self, ctx: click.Context):
        try:
            with interrupt_on_sigterm():
                return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise Interrupted(
                "stopped before it finished; no output was written or changed", signal_of(e)
            ) from None
