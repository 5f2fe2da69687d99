"""The mutation harness's table and score (``conformance_mutants.py``)."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from benchmarks.mutant_catalogue import CATEGORIES, Mutant


class Score(NamedTuple):
    caught: int
    survived: int
    errors: int

    @property
    def percent(self) -> float:
        judged = self.caught + self.survived
        return 100.0 * self.caught / judged if judged else 0.0


def verdict(row: dict) -> str:
    if row.get("error"):
        return "ERROR"
    if row.get("timeout"):
        return "caught (timeout)"
    return "caught" if row.get("caught") else "SURVIVED"


def _where(row: dict) -> str:
    first = row.get("first")
    if row.get("error"):
        return row["error"][:90]
    if not first:
        return f"{row.get('compared', 0)} cases equal"
    counts = []
    if "requests_differ" in first:
        counts.append(f"{first['requests_differ']}/{first['requests']} requests")
    if "steps_differ" in first:
        counts.append(f"{first['steps_differ']}/{first['steps']} steps")
    case = first.get("case", "")
    return f"{case}: {', '.join(counts) or first['what'][:60]}"


def print_table(mutants: list[Mutant], rows: list[dict], seconds: float) -> Score:
    print(f"{'mutant':<24} {'category':<34} {'verdict':<16} caught by (case: differing)")
    for mutant, row in zip(mutants, rows, strict=True):
        print(f"{mutant.name:<24} {mutant.category:<34} {verdict(row):<16} {_where(row)}")
    kinds = Counter(verdict(row) for row in rows)
    score = Score(kinds["caught"] + kinds["caught (timeout)"], kinds["SURVIVED"], kinds["ERROR"])
    print()
    for category in CATEGORIES:
        mine = [verdict(r) for m, r in zip(mutants, rows, strict=True) if m.category == category]
        if mine:
            print(f"  {category:<34} {sum(v.startswith('caught') for v in mine)} / {len(mine)}")
    print(
        f"score: {score.caught} of {score.caught + score.survived} mutants caught ({score.percent:.0f}%), "
        f"{score.errors} error(s), {seconds:.0f} s"
    )
    return score
