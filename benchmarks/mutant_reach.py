"""Which planted mistakes of the catalogue sit on a line the CI conformance cases run at all.

A mutant whose line no case runs measures nothing: it survives whatever the suite compares. That happens
when code moves under the catalogue (a fast path takes over and the reference it planted keeps only a
switch's or a rare caller's use), and the catalogue's snippet still applies, so ``test_conformance_mutants``
cannot tell. This runs the simulator's side of every kept case (``mutant_check.check``, unmutated, pure
Python) under a line tracer and counts, for each mutant, the cases that run its changed line:

    python benchmarks/mutant_oracle.py --engine freetoken --out out/mutants/oracle-freetoken.pickle
    python benchmarks/mutant_reach.py --oracle out/mutants/oracle-freetoken.pickle [--oracle ...]

Only the mutants the given oracles' engines can see are counted. Lines run only inside the engines' own code do
not count: the tracer watches ``sim/`` alone.
"""

from __future__ import annotations

import argparse
import sys
from itertools import zip_longest
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.mutant_catalogue import Mutant, load  # noqa: E402
from benchmarks.mutant_check import compare_case  # noqa: E402
from benchmarks.mutant_oracle import KINDS, Answer, Case, load_answers  # noqa: E402


def changed_line(mutant: Mutant, root: Path = REPO_ROOT) -> int:
    """The number of the one line the mutant changes, in its file as it is now."""
    text = (root / mutant.path).read_text()
    first = text[: text.index(mutant.original)].count("\n") + 1
    pairs = zip_longest(mutant.original.splitlines(), mutant.replacement.splitlines())
    return first + next(i for i, (old, new) in enumerate(pairs) if old != new)


class LineWatch:
    """The watched lines that ran since the last ``take``; a tracer on the watched files' frames only."""

    def __init__(self, lines: dict[str, set[int]]) -> None:
        self.lines = lines  # absolute file name -> line numbers
        self.ran: set[tuple[str, int]] = set()
        self._by_code: dict[object, set[int] | None] = {}

    def _watched_in(self, code) -> set[int] | None:
        if code not in self._by_code:
            lines = self.lines.get(code.co_filename, set())
            spanned = {line for _, _, line in code.co_lines() if line is not None} if lines else set()
            self._by_code[code] = (lines & spanned) or None
        return self._by_code[code]

    def __call__(self, frame, event, arg):
        watched = self._watched_in(frame.f_code)
        if watched is None:
            return None
        name, ran = frame.f_code.co_filename, self.ran

        def on_line(frame, event, arg):
            if event == "line" and frame.f_lineno in watched:
                ran.add((name, frame.f_lineno))
            return on_line

        return on_line

    def take(self) -> set[tuple[str, int]]:
        ran, self.ran = self.ran, set()
        return ran


def reach(answers: dict[Case, Answer], mutants: list[Mutant]) -> dict[str, int]:
    """For each mutant, how many compared cases run its changed line."""
    where = {m.name: (str(REPO_ROOT / m.path), changed_line(m)) for m in mutants}
    lines: dict[str, set[int]] = {}
    for file, line in where.values():
        lines.setdefault(file, set()).add(line)
    watch, counts = LineWatch(lines), dict.fromkeys(where, 0)
    for case, answer in answers.items():
        if answer.skipped:
            continue
        sys.settrace(watch)
        try:
            compare_case(case, answer)
        finally:
            sys.settrace(None)
        ran = watch.take()
        for name, spot in where.items():
            counts[name] += spot in ran
    return counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", type=Path, action="append", required=True, help="kept answers (repeat)")
    args = parser.parse_args(argv)
    answers: dict[Case, Answer] = {}
    for path in args.oracle:
        answers.update(load_answers(path))
    answers = dict(sorted(answers.items(), key=lambda item: KINDS.index(item[0].kind)))
    engines = {case.engine for case in answers}
    mutants = [m for m in load() if set(m.engines) & engines]
    counts = reach(answers, mutants)
    num_cases = sum(not a.skipped for a in answers.values())
    print(f"{'mutant':24} {'line':>40}  cases running it (of {num_cases})")
    for mutant in mutants:
        spot = f"{mutant.path.removeprefix('sim/')}:{changed_line(mutant)}"
        count = counts[mutant.name]
        print(f"{mutant.name:24} {spot:>40}  {count}{'' if count else '  NEVER RUN'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
