"""Every case of the hostile-input corpus (tests/hostile_inputs.py) against the CLI, in-process: how many
fail cleanly (exit 2 naming the file:line:field or the option, no traceback, no hang, nothing written),
per class, and what each other one did.

    python benchmarks/hostile_inputs.py [--only PREFIX] [--seconds 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.hostile_inputs import all_cases, describe, judge, lay_out, summary_line  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="cases whose name starts with this")
    parser.add_argument("--seconds", type=int, default=60, help="a case taking longer is a hang")
    args = parser.parse_args(argv)
    outcomes: dict[str, str | None] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostile-") as work:
        scratch = Path(work) / "scratch"
        scratch.mkdir()
        for number, case in enumerate(c for c in all_cases() if c.name.startswith(args.only)):
            folder = Path(work) / str(number)
            folder.mkdir()
            lay_out(case, folder, scratch)
            outcomes[case.name] = judge(case, folder, args.seconds)
    by_class, clean_by_class = Counter[str](), Counter[str]()
    for name, problem in outcomes.items():
        by_class[name.split("/")[0]] += 1
        clean_by_class[name.split("/")[0]] += problem is None
    for name in by_class:
        print(f"  {name:<12} {clean_by_class[name]:>4} of {by_class[name]:>4} clean")
    print(f"{summary_line(outcomes)} ({time.perf_counter() - started:.0f} s)")
    if any(outcomes.values()):
        print("not clean:", describe(outcomes))


if __name__ == "__main__":
    main()
