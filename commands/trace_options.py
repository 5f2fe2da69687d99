"""The options of `trace gen` (from each generator's signature) and `trace import` (per format)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable

import click

from commands.options import DescribedOption
from commands.param_types import Integer, Number, strict

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
    return DescribedOption([flag], type=strict(hint), show_default=True, help=help_text, **given)


def generator_params(generator: Callable) -> list[click.Parameter]:
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
            "type": Integer(min=1),
            "default": 2,
            "help": "whole blocks a follow-up must share with its parent",
        },
    ),
    "prefix_groups": (
        ["--prefix-groups"],
        {
            "type": Integer(min=1),
            "default": 8,
            "help": "shared system prompts the requests are spread over",
        },
    ),
    "shared_len": (
        ["--shared-len"],
        {"type": Integer(min=1), "default": 512, "help": "tokens of each shared system prompt"},
    ),
    "seed": (
        ["--seed"],
        {"type": Integer(), "default": 0, "help": "seed of the random choices (groups, arrivals)"},
    ),
    "chars_per_token": (
        ["--chars-per-token"],
        {"type": Number(), "default": 4.0, "help": "characters per estimated token"},
    ),
    "request_rate": (
        ["--request-rate"],
        {"type": Number(), "default": 1.0, "help": "conversations (openai-jsonl: requests) per second"},
    ),
    "think_time": (
        ["--think-time"],
        {"type": Number(), "default": 0.0, "help": "seconds between a turn's end and the next turn"},
    ),
    "output_len": (
        ["--output-len"],
        {
            "type": Integer(min=1),
            "default": 256,
            "help": "output tokens of a turn without a recorded reply",
        },
    ),
    "max_turns": (
        ["--max-turns"],
        {
            "type": Integer(min=1),
            "default": None,
            "help": "user turns kept per conversation",
            "show_default": "all",
        },
    ),
}


IMPORT_DEFAULTS = {"sglang-agentic": {"output_len": 220}}  # bench_serving's DEFAULT_AGENTIC_OUTPUT_LEN


def import_params(fmt: str, names: tuple[str, ...]) -> list[click.Parameter]:
    options: list[click.Parameter] = []
    for name in names:
        decls, kwargs = IMPORT_OPTIONS[name]
        kwargs = {"show_default": True} | kwargs
        if name in IMPORT_DEFAULTS.get(fmt, {}):
            kwargs["default"] = IMPORT_DEFAULTS[fmt][name]
        options.append(DescribedOption([*decls, name], **kwargs))
    return options
