"""The command line's options, built from the declarations they configure so that every option has a help
text and shows its default: knobs and pool options from the knob schema (``sim/cache/knobs.py``); the
``trace gen`` and ``trace import`` options are in ``commands/trace_options.py``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

import click

from sim.atomic import describe_os_error
from sim.cache.knobs import NONE, KnobSpec
from sim.engines.registry import policy_names
from sim.run.config import POOL_KNOBS, SimConfig

PRESET_DEFAULT = "the preset's, see cli.py policies"
# a trace or dataset to read: a file (plain, gzip or zstd) or - for standard input
TRACE_INPUT = click.Path(exists=True, dir_okay=False, allow_dash=True)


class InputError(click.ClickException):
    """Bad user input: exit status 2, like click's own usage errors."""

    exit_code = 2


def call_library(fn: Callable, *args, **kwargs):
    """Run a library call, turning bad-input exceptions into an InputError: a bad value (TraceError is a
    ValueError) as its message, a disk or permission error as one line naming the path and the errno."""
    try:
        return fn(*args, **kwargs)
    except OSError as e:
        raise InputError(describe_os_error(e)) from e
    except ValueError as e:
        raise InputError(str(e)) from e


def call_with_options(option_names: Iterable[str], fn: Callable, *args, **kwargs):
    """``call_library``, with a parameter a message names (``num_sessions must ...``, ``track_interval 100
    must be a multiple of page_size 64``) shown as the option the user types (``--num-sessions must ...``)."""
    try:
        return call_library(fn, *args, **kwargs)
    except InputError as e:
        raise InputError(options_named(e.message, option_names)) from e.__cause__


def options_named(message: str, option_names: Iterable[str]) -> str:
    """``message`` with each parameter name as its option: a name with an underscore wherever it stands as
    a word (it is no English word), a one-word name (``window``) only before ``must`` or a number."""
    for name in sorted(option_names, key=len, reverse=True):
        after = "" if "_" in name else r"(?= must| \(?-?\d)"
        # never inside a path (/tmp/page_size/t.jsonl) or a longer name
        word = rf"(?<![\w./\\-]){name}(?![\w/\\-]|\.\w){after}"
        message = re.sub(word, "--" + name.replace("_", "-"), message)
    return message


FORMAT_HELP = {
    "text": "aligned plain text",
    "md": "markdown, ready to paste into a pull request",
    "json": "one JSON object",
}


def format_option(choices: tuple[str, ...] = ("text", "md", "json"), what: str = "the result is"):
    """The one output flag of every command that prints a result: ``--format``."""
    return option(
        "--format",
        "fmt",
        default=choices[0],
        show_default=True,
        type=click.Choice(choices),
        help=f"how {what} printed: " + "; ".join(f"{c}: {FORMAT_HELP[c]}" for c in choices),
    )


class KnobType(click.ParamType):
    """A knob's value, parsed and checked by its schema (``sim/cache/knobs.py``)."""

    def __init__(self, spec: KnobSpec):
        self.spec = spec
        self.name = (
            "|".join("none" if c is None else c for c in spec.choices)
            if spec.choices
            else (spec.kind.__name__.upper() + ("|none" if spec.nullable else ""))
        )

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        try:
            return self.spec.parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class PolicyChoice(click.Choice):
    """The registered presets, read when an option is parsed: an engine registered after the command line was
    built (a plugin, a test's toy engine) is a valid choice too."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(policy_names())

    @choices.setter
    def choices(self, value: object) -> None:
        pass


class DescribedOption(click.Option):
    """An option whose ``show_default`` text (a default that is not a value: "the preset's", "none") is
    printed as it is, not in click's parentheses."""

    def get_help_extra(self, ctx: click.Context):
        extra = super().get_help_extra(ctx)
        if isinstance(self.show_default, str):
            extra["default"] = self.show_default
        return extra


def option(*decls: str, **kwargs):
    """``click.option`` with ``DescribedOption``: every option of this command line is made here."""
    return click.option(*decls, cls=DescribedOption, **kwargs)


def spec_options(specs: dict[str, KnobSpec], defaults: dict | None = None, preset_default: bool = False):
    """One option per knob of ``specs`` with help, unit and range from the schema. ``defaults``: this
    command's defaults; ``preset_default``: a knob not given takes the policy preset's value."""
    defaults = defaults or {}

    def decorate(fn):
        for spec in reversed(list(specs.values())):
            default = None if preset_default else defaults.get(spec.name)
            shown = True if default is not None else PRESET_DEFAULT if preset_default else "none"
            fn = option(
                spec.flag,
                spec.name,
                type=KnobType(spec),
                default=default,
                show_default=shown,
                help=spec.describe(),
            )(fn)
        return fn

    return decorate


def pool_defaults(**overrides: object) -> dict:
    """SimConfig's pool defaults (the schema's), with a command's own on top (the executor's small pools)."""
    fields = {f.name: f.default for f in dataclasses.fields(SimConfig) if f.name in POOL_KNOBS}
    return fields | overrides


def pool_options(**overrides: object):
    return spec_options(POOL_KNOBS, pool_defaults(**overrides))


def pools_as_config(values: dict) -> dict:
    """Pool options as SimConfig fields ("none": derived, as when not given)."""
    return {name: None if value == NONE else value for name, value in values.items()}
