"""The engines' side of the CI conformance set, run once and kept (for ``conformance_mutants.py``).

A mutant of ``sim/`` changes only the simulator's side of a comparison: the engines' own code, their drivers
and the scenario generators do not import the mutated modules (``check_mutant`` regenerates every scenario
in the mutated tree and refuses to compare one that changed). So each engine answers each CI case once, in
a process of its own, and every mutant is compared against the kept answers: the same comparisons
``tests/conformance/test_suite_agrees.py`` makes, without rerunning SGLang, FreeToken and vLLM per mutant.

A case is (kind, engine, seed, pressure, preset): kind ``single`` (one request at a time, replay and timed),
``spaced`` (one request at a time, step by step: ``conformance/spaced.py``), ``concurrent`` (many in flight,
step by step) or ``boundary`` (step by step, lengths and pools at the rules' boundaries: ``generate_boundary``), seeds ``0..seeds-1``, both pressures, every preset of the engine's driver.
The kept answers are stamped with a digest of ``conformance/``: a changed driver or generator rebuilds them.

    python benchmarks/mutant_oracle.py --engine vllm --seeds 30 --out out/oracle-vllm.pickle
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import sys
import time
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

KINDS = ("single", "spaced", "concurrent", "boundary")


class Case(NamedTuple):
    kind: str  # one of KINDS
    engine: str
    seed: int
    pressure: bool
    preset: str

    def label(self) -> str:
        return (
            f"{self.kind} {self.engine} seed {self.seed}{' pressure' if self.pressure else ''} {self.preset}"
        )


class Answer(NamedTuple):
    """What the engine answered a case: its scenario (as JSON, to check a mutant did not change it) and its
    outcome (per-request outcomes, or a Trajectory); ``skipped`` says why there is none (the engine rejects
    the configuration up front, or corrupted its own state)."""

    scenario_json: str
    outcome: object
    skipped: str = ""


def load_answers(path: Path) -> dict[Case, Answer]:
    return {
        Case(*case): Answer(*answer) for case, answer in pickle.loads(path.read_bytes())["answers"].items()
    }


def conformance_digest(root: Path = REPO_ROOT) -> str:
    """A digest of every file the engines' side reads: the drivers, generators and scenario code."""
    digest = hashlib.sha256()
    for path in sorted((root / "conformance").rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def scenario_of(kind: str, engine: str, seed: int, pressure: bool):
    from conformance.generate import generate
    from conformance.generate_boundary import generate_boundary
    from conformance.generate_concurrent import generate_concurrent
    from conformance.spaced import generate_spaced

    make = {
        "single": generate,
        "spaced": generate_spaced,
        "concurrent": generate_concurrent,
        "boundary": generate_boundary,
    }[kind]
    return make(engine, seed, pressure)


def kinds_of(engine: str) -> tuple[str, ...]:
    """The CI runs every engine one request at a time, and step by step (one at a time spaced out, concurrent,
    and the boundary family) those with a concurrent driver."""
    from conformance import spaced
    from conformance.suite import CONCURRENT

    return tuple(
        kind
        for kind in KINDS
        if kind == "single" or engine in (spaced.ENGINES if kind == "spaced" else CONCURRENT)
    )


def _known(kind: str) -> dict:
    """The open differences listed for this kind of case (reported, not compared)."""
    from conformance import generate_boundary, spaced

    return {"spaced": spaced.KNOWN, "boundary": generate_boundary.KNOWN}.get(kind, {})


def _seeds_of(kind: str, engine: str, seeds: range) -> list[int]:
    """The seeds CI runs of this kind: ``seeds``, and for the boundary family its targeted seeds too."""
    from conformance.generate_targeted import targeted_seeds

    extra = targeted_seeds(engine) if kind == "boundary" else ()
    return [*seeds, *(seed for seed in extra if seed not in seeds)]


def answer_all(engine: str, seeds: range, kinds: tuple[str, ...] = KINDS) -> dict[Case, Answer]:
    """Every CI case of ``engine`` (of ``kinds``) through its own code (in this process: call it in a fresh
    one)."""
    from conformance.suite import driver
    from conformance.trajectory import EngineCorrupt

    module, answers = driver(engine), {}
    for kind in (k for k in kinds_of(engine) if k in kinds):
        for pressure in (False, True):
            for seed in _seeds_of(kind, engine, seeds):
                scenario = scenario_of(kind, engine, seed, pressure)
                why = module.accepts(scenario.config)
                for preset in tuple(module.PRESETS):
                    case = Case(kind, engine, seed, pressure, preset)
                    if why is not None:
                        answers[case] = Answer(scenario.to_json(), None, f"rejected: {why}")
                        continue
                    if (engine, seed, pressure) in _known(kind):
                        answers[case] = Answer(scenario.to_json(), None, "a known difference")
                        continue
                    try:
                        run = module.run if kind == "single" else module.run_steps
                        answers[case] = Answer(scenario.to_json(), run(scenario, preset))
                    except EngineCorrupt as error:
                        answers[case] = Answer(scenario.to_json(), None, f"engine corrupt: {error}")
    return answers


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", required=True)
    parser.add_argument("--seeds", type=int, default=30, help="how many seeds (CI: 30)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    answers = answer_all(args.engine, seeds, tuple(args.kinds.split(",")))
    # plain tuples: the kept file must not name this script's classes as ``__main__``'s
    plain = {tuple(case): tuple(answer) for case, answer in answers.items()}
    kinds = sorted(args.kinds.split(","))
    kept = {"digest": conformance_digest(), "seeds": args.seeds, "kinds": kinds, "answers": plain}
    if args.first_seed:
        kept["seeds"] = None  # a part of the CI set: never taken for the whole
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps(kept))
    print(
        f"{args.engine}: {len(answers)} cases answered in {time.perf_counter() - started:.0f} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
