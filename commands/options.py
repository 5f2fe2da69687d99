"""The command line's options, built from the declarations they configure so that every option has a help
text and shows its default: knobs and pool options from the knob schema (``sim/cache/knobs.py``),
``trace gen`` options from the generators' signatures, ``trace import`` options per format."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Iterable

import click

from sim.atomic import describe_os_error
from sim.cache.knobs import NONE, KnobSpec
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
    """``call_library``, with a parameter a message names (``num_sessions must ...``) shown as the option
    the user typed (``--num-sessions must ...``)."""
    try:
        return call_library(fn, *args, **kwargs)
    except InputError as e:
        for name in option_names:
            e.message = re.sub(rf"(?<![\w-]){name}(?= must)", "--" + name.replace("_", "-"), e.message)
        raise


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


# ---- trace gen -------------------------------------------------------------------------------------
GEN_HELP = {
    "num_groups": "fan-out groups, each with its own system prompt",
    "prompts_per_group": "prompts per group, each with its own question",
    "system_len": "tokens of a system prompt",
    "question_len": "tokens of each question",
    "output_len": "output tokens of each request",
    "request_rate": "requests (sessions) per second, Poisson; inf: all at time 0",
    "seed": "seed of the random arrivals and lengths",
    "num_sessions": "chat sessions",
    "num_turns": "turns per session",
    "user_len": "tokens of each user message",
    "think_time": "seconds between a turn's end and the next turn",
    "drop_reasoning": "output tokens a client drops from each turn before resending it (reasoning)",
    "shared_system": "one system prompt for all sessions (else one each)",
    "num_prompts": "first-turn prompts, all sent at time 0",
    "prompt_len": "tokens of each prompt",
    "followup_output_len": "output tokens of each second turn",
    "prompt_len_jitter": "prompt lengths vary uniformly by +- this many tokens",
    "distance": "tokens from prompt 1's end where prompt 2 diverges",
    "mode": "fanout: a different user message; append: the first request's history + a new message",
}


def generator_option(param: inspect.Parameter, hint: object) -> click.Option:
    flag = "--" + param.name.replace("_", "-")
    # click treats an explicit default=None as a default, so a required option gets none at all
    given = {"required": True} if param.default is inspect.Parameter.empty else {"default": param.default}
    help_text = GEN_HELP.get(param.name, "")
    if typing.get_origin(hint) is typing.Literal:
        return DescribedOption(
            [flag], type=click.Choice(typing.get_args(hint)), show_default=True, help=help_text, **given
        )
    if hint is bool:
        return DescribedOption([f"{flag}/--no-{flag[2:]}"], show_default=True, help=help_text, **given)
    return DescribedOption([flag], type=hint, show_default=True, help=help_text, **given)


def generator_params(generator: Callable) -> list[click.Option]:
    hints = typing.get_type_hints(generator)
    return [generator_option(p, hints[p.name]) for p in inspect.signature(generator).parameters.values()]


# ---- trace import ----------------------------------------------------------------------------------
IMPORT_OPTIONS: dict[str, tuple[list[str], dict]] = {
    "chains": (
        ["--chains/--no-chains"],
        {"default": True, "help": "infer multi-turn follow-ups from the block hashes"},
    ),
    "whole_output_only": (
        ["--whole-output-only"],
        {"is_flag": True, "default": False, "help": "a follow-up must hold its parent's whole output"},
    ),
    "min_match_blocks": (
        ["--min-match-blocks"],
        {
            "type": click.IntRange(min=1),
            "default": 2,
            "help": "whole blocks a follow-up must share with its parent",
        },
    ),
    "prefix_groups": (
        ["--prefix-groups"],
        {
            "type": click.IntRange(min=1),
            "default": 8,
            "help": "shared system prompts the requests are spread over",
        },
    ),
    "shared_len": (
        ["--shared-len"],
        {"type": click.IntRange(min=1), "default": 512, "help": "tokens of each shared system prompt"},
    ),
    "seed": (
        ["--seed"],
        {"type": int, "default": 0, "help": "seed of the random choices (groups, arrivals)"},
    ),
    "chars_per_token": (
        ["--chars-per-token"],
        {"type": float, "default": 4.0, "help": "characters per estimated token"},
    ),
    "request_rate": (
        ["--request-rate"],
        {"type": float, "default": 1.0, "help": "conversations (openai-jsonl: requests) per second"},
    ),
    "think_time": (
        ["--think-time"],
        {"type": float, "default": 0.0, "help": "seconds between a turn's end and the next turn"},
    ),
    "output_len": (
        ["--output-len"],
        {
            "type": click.IntRange(min=1),
            "default": 256,
            "help": "output tokens of a turn without a recorded reply",
        },
    ),
    "max_turns": (
        ["--max-turns"],
        {
            "type": click.IntRange(min=1),
            "default": None,
            "help": "user turns kept per conversation",
            "show_default": "all",
        },
    ),
}
IMPORT_DEFAULTS = {"sglang-agentic": {"output_len": 220}}  # bench_serving's DEFAULT_AGENTIC_OUTPUT_LEN


def import_params(fmt: str, names: tuple[str, ...]) -> list[click.Option]:
    options = []
    for name in names:
        decls, kwargs = IMPORT_OPTIONS[name]
        kwargs = {"show_default": True} | kwargs
        if name in IMPORT_DEFAULTS.get(fmt, {}):
            kwargs["default"] = IMPORT_DEFAULTS[fmt][name]
        options.append(DescribedOption([*decls, name], **kwargs))
    return options
