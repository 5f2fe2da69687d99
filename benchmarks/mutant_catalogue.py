"""One-line mistakes planted in ``sim/`` to measure the conformance suite (``conformance_mutants.py``).

The catalogue is ``conformance_mutants.jsonl``, one mutant a line: its ``name``, the file (``path``, from the
repository root), a snippet found exactly once in it (``original``: it may carry a line of context so that it
is unique; only one line changes), its ``replacement``, a ``category`` and the ``engines`` whose conformance
runs can see it (the shared radix code: SGLang and FreeToken; Marconi uses it too but has no conformance
driver, so no mutant names it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

CATALOGUE = Path(__file__).resolve().parent / "conformance_mutants.jsonl"
CATEGORIES = (
    "frontiers and gaps",
    "grids and rounding",
    "budgets and slack",
    "hit searches",
    "release and retention",
    "eviction order and ties",
    "recency on split / match / finish",
    "scheduler order",
)
ENGINES = ("sglang", "freetoken", "vllm")


class Mutant(NamedTuple):
    name: str
    path: str
    original: str
    replacement: str
    category: str
    engines: tuple[str, ...]


class MutantMissing(ValueError):
    """A mutant's snippet is not in its file exactly once: the catalogue is stale (an error, never a survivor)."""


def load(path: Path = CATALOGUE) -> list[Mutant]:
    """The catalogue, checked: unique names, known categories and engines, a real change."""
    mutants = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = json.loads(line)
        mutant = Mutant(**{**fields, "engines": tuple(fields["engines"])})
        where = f"{path.name}:{number} ({mutant.name})"
        if mutant.category not in CATEGORIES or not set(mutant.engines) <= set(ENGINES) or not mutant.engines:
            raise ValueError(f"{where}: category {mutant.category!r} or engines {mutant.engines} unknown")
        if mutant.original == mutant.replacement:
            raise ValueError(f"{where}: the replacement is the original")
        mutants.append(mutant)
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise ValueError(f"{path.name}: mutant names repeat")
    return mutants


def apply(text: str, mutant: Mutant) -> str:
    count = text.count(mutant.original)
    if count != 1:
        raise MutantMissing(f"{mutant.name}: {mutant.path} holds its snippet {count} times, not once")
    return text.replace(mutant.original, mutant.replacement)
