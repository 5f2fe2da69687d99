"""Fingerprint every user-facing output of a checkout, to prove a refactoring changed none of them.

Runs `simulate` (8 policies x 3 sample traces x both modes, JSON printout + --out tables; text, markdown,
qwen3-next and gemma variants), `trace import mooncake` of the real conversation trace and `simulate` on it
(5 policies, replay; one timed), `trace stats`, `trace gen s1`, the seed experiments s1 / s2 / s3 /
vllm-align, and a small `grid`, each into OUT. Then one sha256 per file. Outputs that name the code that
made them differ by design between two checkouts and are compared without it: the grid store's point keys
hash the source (sim/code_version.py), so its tables are compared as a multiset of contents and its JSON /
grid.csv without the code-identity fields; stderr carries progress lines with wall times and is skipped, and
a printout's import time and the spacing around the output folder's name are not compared.

    python scripts/output_fingerprint.py run OUT             # from the checkout to fingerprint (~6 min)
    python scripts/output_fingerprint.py compare OUT_A OUT_B # IDENTICAL, or the files that differ

The Mooncake trace is $HYBRIDCACHE_SHARED/traces/mooncake/conversation_trace.jsonl (default ../shared).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HYBRIDCACHE_SHARED", REPO.parent / "shared"))
POLICIES = ("no-cache", "radix", "sglang", "sglang-retain", "freetoken", "freetoken-lazy", "vllm", "marconi")
SAMPLES = ("fanout", "multiturn", "mooncake_conversation_500")
CODE_FIELDS = {"key", "source_sha256", "git", "dirty", "code", "code_version", "computed_by"}


def commands(out: Path) -> list[tuple[str, list[str]]]:
    runs = []
    for trace in SAMPLES:
        for policy in POLICIES:
            for mode in ("timed", "replay"):
                name = f"sim-{trace}-{policy}-{mode}"
                runs.append(
                    (
                        name,
                        [
                            "simulate",
                            "--trace",
                            f"traces/{trace}.jsonl",
                            "--policy",
                            policy,
                            "--mode",
                            mode,
                            "--format",
                            "json",
                            "--out",
                            str(out / name),
                        ],
                    )
                )
    runs += [
        ("sim-text", ["simulate", "--trace", "traces/fanout.jsonl"]),
        (
            "sim-md",
            ["simulate", "--trace", "traces/multiturn.jsonl", "--format", "md", "--compare", "sglang"],
        ),
        (
            "sim-qwen",
            [
                "simulate",
                "--trace",
                "traces/multiturn.jsonl",
                "--model",
                "qwen3-next",
                "--pool-tokens",
                "60000",
                "--mamba-states",
                "12",
                "--format",
                "json",
            ],
        ),
        (
            "sim-gemma",
            [
                "simulate",
                "--trace",
                "traces/fanout.jsonl",
                "--model",
                "gemma-4-26b-a4b",
                "--pool-tokens",
                "60000",
                "--format",
                "json",
                "--policy",
                "freetoken",
            ],
        ),
    ]
    return (
        runs
        + mooncake_commands(out)
        + [
            ("exp-s1", ["experiment", "s1", "--format", "md"]),
            ("exp-s2", ["experiment", "s2", "--format", "md"]),
            ("exp-s3", ["experiment", "s3", "--format", "md"]),
            ("exp-vllm-align", ["experiment", "vllm-align", "--format", "md"]),
            ("gen-s1", ["trace", "gen", "s1", "-o", str(out / "s1.jsonl")]),
            (
                "grid",
                [
                    "grid",
                    "--trace",
                    "traces/fanout.jsonl",
                    "--policy",
                    "sglang,freetoken",
                    "--page-size",
                    "16,64",
                    "--out",
                    str(out / "grid"),
                ],
            ),
        ]
    )


def mooncake_commands(out: Path) -> list[tuple[str, list[str]]]:
    source, imported = SHARED / "traces/mooncake/conversation_trace.jsonl", str(out / "mc.jsonl")
    runs = [
        ("mc-import", ["trace", "import", "mooncake", str(source), "-o", imported]),
        ("mc-stats", ["trace", "stats", imported]),
    ]
    for policy in ("sglang", "sglang-retain", "freetoken", "freetoken-lazy", "vllm"):
        runs.append(
            (
                f"mc-sim-{policy}",
                [
                    "simulate",
                    "--trace",
                    imported,
                    "--policy",
                    policy,
                    "--mode",
                    "replay",
                    "--format",
                    "json",
                    "--out",
                    str(out / f"mc-sim-{policy}"),
                ],
            )
        )
    return runs + [
        (
            "mc-sim-timed",
            [
                "simulate",
                "--trace",
                imported,
                "--policy",
                "sglang-retain",
                "--mode",
                "timed",
                "--format",
                "json",
                "--no-bounds",
            ],
        )
    ]


def run(out: Path) -> list[str]:
    """Every command's outputs under ``out``; returns the commands that failed (each must succeed, or the
    fingerprint would compare two error messages)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    failed = []
    for name, args in commands(out):
        done = subprocess.run([sys.executable, "cli.py", *args], cwd=REPO, capture_output=True, text=True)
        (out / f"{name}.stdout").write_text(done.stdout.replace(str(out), "OUT") + f"rc={done.returncode}\n")
        if done.returncode != 0:
            failed.append(f"{name}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return failed


def compare(a: Path, b: Path) -> list[str]:
    """The outputs that differ between two fingerprinted runs (empty: identical)."""
    files_a, files_b = _files(a), _files(b)
    plain = sorted(f for f in files_a | files_b if not f.startswith("grid/"))
    differ = [f"only in one: {f}" for f in plain if (f in files_a) != (f in files_b)]
    differ += [
        f"differs: {f}" for f in plain if f in files_a and f in files_b and _bytes(a, f) != _bytes(b, f)
    ]
    return differ + [
        f"differs: grid store ({what})"
        for what, x, y in zip(("tables", "point records", "grid.csv"), _grid(a), _grid(b), strict=True)
        if x != y
    ]


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _bytes(root: Path, name: str) -> bytes:
    data = (root / name).read_bytes().replace(str(root.resolve()).encode(), b"OUT")
    if not name.endswith(".stdout"):
        return data
    # a printout names the output folder (a table centres it: its width follows the folder's name) and says
    # how long an import took; neither is a result
    data = re.sub(rb"in \d+\.\d+ s\b", b"in T s", data)
    return b"\n".join(b" ".join(line.split()) if b"OUT" in line else line for line in data.split(b"\n"))


def _without_code(obj):
    if isinstance(obj, dict):
        return {k: _without_code(v) for k, v in obj.items() if k not in CODE_FIELDS}
    return [_without_code(v) for v in obj] if isinstance(obj, list) else obj


def _grid(root: Path) -> tuple[list, list, list]:
    import pandas as pd

    points = root / "grid" / "points"
    tables = sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in points.glob("*.csv"))
    records = sorted(
        json.dumps(_without_code(json.loads(p.read_text())), sort_keys=True) for p in points.glob("*.json")
    )
    table = pd.read_csv(root / "grid" / "grid.csv")
    table = table[[c for c in table.columns if c not in CODE_FIELDS]]
    return tables, records, [list(table.columns)] + sorted(map(str, table.values.tolist()))


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "run":
        failed = run(Path(argv[1]).resolve())
        print("\n".join(["commands that failed:", *failed]) if failed else "every command succeeded")
        return 1 if failed else 0
    if len(argv) == 3 and argv[0] == "compare":
        differ = compare(Path(argv[1]).resolve(), Path(argv[2]).resolve())
        print("\n".join(differ) if differ else "IDENTICAL")
        return 1 if differ else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
