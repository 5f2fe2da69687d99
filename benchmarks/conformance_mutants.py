"""How sensitive the conformance suite is: plant each one-line mistake of the catalogue (``conformance_mutants.jsonl``)
in a copy of the tree, run the CI configuration of the suite (30 seeds per engine x pressure, one request at a
time in replay and timed mode, and step by step for the engines with a concurrent driver) for the engines the
mistake can affect, and count the mistakes it catches.

The engines answer each CI case once (``mutant_oracle.py``, kept under ``--oracle-dir`` and rebuilt when
``conformance/`` changes); each mutant's tree is compared against those answers (``mutant_check.py``), stopping
at its first catch. First the unmutated tree is compared on every case: a correct tree must not be flagged.
A mutant whose snippet is not in its file exactly once is an error, not a survivor. Prints a table (mutant,
category, the case that caught it, how many requests / steps differ there) and the score.

    nice -n 10 python benchmarks/conformance_mutants.py [--jobs 2] [--only NAME,...] [--engines vllm,...]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.mutant_catalogue import ENGINES, Mutant, MutantMissing, apply, load  # noqa: E402
from benchmarks.mutant_oracle import KINDS, conformance_digest  # noqa: E402
from benchmarks.mutant_table import print_table, verdict  # noqa: E402

_COPIED = ("sim", "conformance", "benchmarks")  # what a check imports: the mutant lands in sim/


def oracle_path(oracle_dir: Path, engine: str) -> Path:
    return oracle_dir / f"oracle-{engine}.pickle"


def ensure_oracle(oracle_dir: Path, engine: str, seeds: int, kinds: str = ",".join(KINDS)) -> Path:
    """The engine's kept answers to (at least) ``kinds``, rebuilt (in a fresh interpreter) when missing or
    stale."""
    path = oracle_path(oracle_dir, engine)
    if path.exists():
        kept = pickle.loads(path.read_bytes())
        fresh = kept["digest"] == conformance_digest() and kept["seeds"] == seeds
        if fresh and set(kinds.split(",")) <= set(kept.get("kinds", ())):
            return path
    command = [sys.executable, str(REPO_ROOT / "benchmarks/mutant_oracle.py"), "--engine", engine]
    command += ["--seeds", str(seeds), "--kinds", kinds, "--out", str(path)]
    subprocess.run(command, check=True, cwd=REPO_ROOT)
    return path


def copy_tree(into: Path) -> Path:
    root = into / "tree"
    for name in _COPIED:
        shutil.copytree(REPO_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run_check(root: Path, oracles: list[Path], go_on: bool, timeout_s: float, kinds: str) -> dict:
    """``mutant_check.py`` in the tree at ``root`` (its ``sim/`` imported), its JSON answer."""
    command = [sys.executable, str(root / "benchmarks/mutant_check.py")]
    for path in oracles:
        command += ["--oracle", str(path)]
    command += ["--kinds", kinds] + (["--all"] if go_on else [])
    env = dict(os.environ, PYTHONPATH=str(root))
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"caught": True, "timeout": True, "first": {"what": f"no answer in {timeout_s:.0f} s"}}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"}
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if not answer["sim"].startswith(str(root)):
        raise RuntimeError(f"the check imported {answer['sim']}, not the tree at {root}")
    answer["seconds"] = time.perf_counter() - started
    return answer


def check_mutant(mutant: Mutant, oracles: dict[str, Path], timeout_s: float, kinds: str) -> dict:
    row = _check_mutant(mutant, oracles, timeout_s, kinds)
    print(f"  {mutant.name}: {verdict(row)} ({row.get('seconds', 0):.0f} s)", file=sys.stderr, flush=True)
    return row


def _check_mutant(mutant: Mutant, oracles: dict[str, Path], timeout_s: float, kinds: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        root = copy_tree(Path(scratch))
        target = root / mutant.path
        try:
            target.write_text(apply(target.read_text(), mutant))
        except (MutantMissing, FileNotFoundError) as error:
            return {"error": str(error)}
        return run_check(root, [oracles[e] for e in mutant.engines if e in oracles], False, timeout_s, kinds)


def baseline(oracles: dict[str, Path], timeout_s: float, kinds: str) -> dict[str, dict]:
    """The unmutated tree on every case of every engine: nothing may differ."""
    with tempfile.TemporaryDirectory(prefix="mutant-base-") as scratch:
        root = copy_tree(Path(scratch))
        return {engine: run_check(root, [path], True, timeout_s, kinds) for engine, path in oracles.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants checked at once (default 2)")
    parser.add_argument("--only", default="", help="comma-separated mutant names")
    parser.add_argument("--engines", default=",".join(ENGINES), help="only mutants these engines can see")
    parser.add_argument("--seeds", type=int, default=30, help="seeds per engine x pressure (CI: 30)")
    parser.add_argument("--oracle-dir", type=Path, default=REPO_ROOT / "out/mutants")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one mutant's check may take")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"cases compared (default {','.join(KINDS)})"
    )
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = parser.parse_args(argv)
    engines = tuple(args.engines.split(","))
    wanted = set(args.only.split(",")) if args.only else None
    mutants = [m for m in load() if (wanted is None or m.name in wanted) and set(m.engines) & set(engines)]
    oracles = {engine: ensure_oracle(args.oracle_dir, engine, args.seeds, args.kinds) for engine in engines}
    started = time.perf_counter()
    flagged = {} if args.skip_baseline else baseline(oracles, args.timeout, args.kinds)
    for engine, answer in flagged.items():
        print(
            f"unmutated tree, {engine}: {answer.get('compared')} cases compared, "
            f"{answer.get('cases_differ', '?')} differ{'' if not answer.get('error') else ' ' + answer['error']}"
        )
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda m: check_mutant(m, oracles, args.timeout, args.kinds), mutants))
    score = print_table(mutants, rows, time.perf_counter() - started)
    if args.json:
        args.json.write_text(
            json.dumps([{"mutant": m._asdict(), **r} for m, r in zip(mutants, rows, strict=True)], indent=1)
        )
    false_positive = any(a.get("caught") or a.get("error") for a in flagged.values())
    return 1 if false_positive or score.errors else 0


if __name__ == "__main__":
    sys.exit(main())
