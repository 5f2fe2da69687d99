"""Compare two `scripts/output_hashes.py` printouts: the outputs must be equal, and no case may be far slower.

Comparing the first four columns proves that no output changed, but says nothing of speed: a change that made
one preset ~11x slower (Round 22's `marconi-vllm`, 4.4 -> 49 s at 1,000 requests in one process) passed that
proof unseen. So beside the hashes this reads each case's `cpu=` against the base's and names every case over
`--slower` times it. One timing on this machine is good to about +-30%, so the default 2.0 flags what no noise
makes; below `--min-cpu` seconds on both sides a ratio is not read at all.

    python scripts/compare_hashes.py BASE.txt NEW.txt              # exit 0: equal and none slower
    python scripts/compare_hashes.py BASE.txt NEW.txt --slower 1.5

Exit status: 1 when a case's hashes differ or a case is missing from either side, 2 when the outputs are equal
but some case is slower than allowed, 0 otherwise. Every line of both files is read; lines that are not hash lines
are an error naming the file and line.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"^(?P<case>\S+)\s+(?P<hashes>req=\S+ steps=\S+ sum=\S+) cpu=(?P<cpu_s>\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class HashLine:
    case: str
    hashes: str
    cpu_s: float


def read_lines(path: Path) -> dict[str, HashLine]:
    lines: dict[str, HashLine] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.strip():
            continue
        match = LINE.match(text.strip())
        if match is None:
            raise SystemExit(f"{path}:{number}: not an output_hashes.py line: {text!r}")
        if match["case"] in lines:
            raise SystemExit(f"{path}:{number}: case {match['case']!r} appears twice")
        lines[match["case"]] = HashLine(match["case"], match["hashes"], float(match["cpu_s"]))
    return lines


def compare(
    base: dict[str, HashLine], new: dict[str, HashLine], slower: float, min_cpu_s: float
) -> list[str]:
    """One finding a case that differs, is missing or is slower than allowed; none when all is well."""
    findings = [f"missing in the new run: {case}" for case in base if case not in new]
    findings += [f"not in the base run: {case}" for case in new if case not in base]
    for case in (case for case in base if case in new):
        old, now = base[case], new[case]
        if old.hashes != now.hashes:
            findings.append(f"DIFFERENT {case}: {old.hashes} -> {now.hashes}")
        elif max(old.cpu_s, now.cpu_s) >= min_cpu_s and now.cpu_s > slower * max(old.cpu_s, 0.01):
            findings.append(
                f"SLOWER {case}: cpu {old.cpu_s:.2f} -> {now.cpu_s:.2f} s ({now.cpu_s / old.cpu_s:.1f}x)"
            )
    return findings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument(
        "--slower", type=float, default=2.0, help="flag a case over this many times the base's cpu"
    )
    parser.add_argument(
        "--min-cpu", type=float, default=0.5, help="read no ratio where both sides are under this"
    )
    args = parser.parse_args(argv)
    if args.slower < 1.0:
        parser.error(f"--slower {args.slower}: must be at least 1.0")
    base, new = read_lines(args.base), read_lines(args.new)
    findings = compare(base, new, args.slower, args.min_cpu)
    for finding in findings:
        print(finding)
    if any(not finding.startswith("SLOWER") for finding in findings):
        return 1
    print(
        f"{len(base)} cases: outputs equal" + (f", {len(findings)} slower" if findings else ", none slower")
    )
    return 2 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
