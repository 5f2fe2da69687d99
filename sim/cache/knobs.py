"""The knob schema: each knob is declared once, as a field of the dataclass it configures.

``knob(default, help, ...)`` makes a dataclass field that carries a ``KnobSpec`` (unit, range, choices, which
engines read it). Everything else is derived from those fields: validation, the CLI options of every command,
the grid axes and the ``policies`` listing. A value of ``None`` in a nullable knob means what ``none_means``
says (for example "the model's window"); on the command line it is written ``none``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field

# lengths, counts and sizes a simulation can carry (token positions fit in 31 bits everywhere)
MAX_INT = 2**31 - 1
# a nullable knob set to None on purpose; a plain None in a knobs mapping means "not given" (the preset's)
NONE = "none"
_BOOLS = {
    "on": True,
    "true": True,
    "yes": True,
    "1": True,
    "off": False,
    "false": False,
    "no": False,
    "0": False,
}


# numbers as a user writes them: Python's int() and float() also take "1_024" and non-ASCII digits ("６４")
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)


def parse_integer(text: str | int) -> int:
    """An integer written in ASCII decimal digits (a sign allowed); ValueError for anything else."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if not isinstance(text, str) or not _INTEGER.fullmatch(text.strip()):
        raise ValueError(f"not an integer: {text!r}")
    return int(text)


def parse_number(text: str | float) -> float:
    """A decimal number as written (digits, point, exponent; inf and nan as words); ValueError for the rest."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str) or not _NUMBER.fullmatch(text.strip()):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


@dataclass(frozen=True)
class KnobSpec:
    name: str
    kind: type  # int, float or str
    help: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False  # the value must be above ``minimum``, not at it
    choices: tuple | None = None
    nullable: bool = False
    none_means: str = ""  # what None stands for, in the help text
    engines: tuple[str, ...] | None = None  # the engines whose rules read it; None: every engine
    hidden: bool = False  # a deliberately wrong knob for negative controls: no CLI option
    default: object = None  # the declaring dataclass's default

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, text: str) -> object:
        """A command-line value (``"64"``, ``"none"``, ``"tokens"``) -> the knob's value; ValueError says why
        (without the knob's name: the caller names it)."""
        text = text.strip()
        if self.nullable and text.lower() == NONE:
            return NONE
        if self.kind is str:
            return self.check(text)
        if self.kind is bool:
            if text.lower() not in _BOOLS:
                raise ValueError(f"must be {self.expects()}, got {text!r}")
            return _BOOLS[text.lower()]
        try:
            number = parse_number(text) if self.kind is float else parse_integer(text)
        except ValueError:
            raise ValueError(f"must be {self.expects()}, got {text!r}") from None
        return self.check(number)

    def check(self, value: object) -> object:
        """``value`` if it is allowed, else ValueError saying which rule it breaks."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError(f"must be {self.expects()}, got none")
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"must be {self.expects()}, got {value!r}")
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"must be {self.expects()}, got {value!r}")
            return value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (self.kind is int and not isinstance(value, int))
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise ValueError(f"must be {self.expects()}, got {value!r}")
        if self.minimum is not None and (
            value < self.minimum or (self.exclusive_minimum and value == self.minimum)
        ):
            raise ValueError(f"must be {self.expects(upper=False)}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"must be {self.expects(lower=False)}, got {value!r}")
        return value

    def expects(self, lower: bool = True, upper: bool = True) -> str:
        if self.kind is bool:
            return "on or off"
        if self.choices is not None:
            return "one of " + ", ".join("none" if c is None else str(c) for c in self.choices)
        low = "> " if self.exclusive_minimum else ">= "
        bounds = [
            low + _num(self.minimum) if lower and self.minimum is not None else "",
            f"<= {_num(self.maximum)}" if upper and self.maximum is not None else "",
        ]
        text = " and ".join(b for b in bounds if b)
        text = ("an integer" if self.kind is int else "a finite number") + (" " + text if text else "")
        return text + (" (or none)" if self.nullable and lower and upper else "")

    def describe(self) -> str:
        """The one-line help of the CLI option."""
        parts = [self.help]
        if self.unit:
            parts.append(f"[{self.unit}]")
        if self.nullable and self.none_means:
            parts.append(f"(none: {self.none_means})")
        if self.engines:
            parts.append(f"({', '.join(self.engines)} only)")
        return " ".join(parts)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def knob(default: object, help: str, **spec: object):
    """A dataclass field declaring a knob (see ``KnobSpec`` for ``spec``); name and type come from the field."""
    return field(default=default, metadata={"knob": spec | {"help": help}})


def knob_specs(cls: type) -> dict[str, KnobSpec]:
    """The knobs of dataclass ``cls``, in declaration order."""
    hints = typing.get_type_hints(cls)
    specs = {}
    for f in dataclasses.fields(cls):
        if "knob" not in f.metadata:
            continue
        kind, nullable = _kind(hints[f.name])
        spec = dict(f.metadata["knob"])
        spec.setdefault("nullable", nullable)
        specs[f.name] = KnobSpec(name=f.name, kind=kind, default=f.default, **spec)
    return specs


def _kind(hint: object) -> tuple[type, bool]:
    args = typing.get_args(hint)
    if args:  # X | None
        inner = [a for a in args if a is not type(None)]
        return inner[0], type(None) in args
    return hint, False  # type: ignore[return-value]
