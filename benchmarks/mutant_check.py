"""One tree (mutated or not) against the engines' kept answers (``mutant_oracle.py``): the simulator's side of
every CI case, in the CI's order, compared as ``tests/conformance/test_suite_agrees.py`` compares it; stops at
the first case that differs (``--all``: goes on). Prints one JSON object: caught or not, by which case, how
many requests (and steps) differ there, and the cases compared.

Run from the root of the tree to check (its ``sim/`` is the one imported):

    python benchmarks/mutant_check.py --oracle out/mutants/oracle-vllm.pickle [--kinds single,concurrent]
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.mutant_oracle import KINDS, Answer, Case, load_answers, scenario_of  # noqa: E402


def compare_case(case: Case, answer: Answer) -> dict | None:
    """None where the simulator agrees; else what differs (a crash of the simulator counts: CI fails too)."""
    scenario = scenario_of(case.kind, case.engine, case.seed, case.pressure)
    if scenario.to_json() != answer.scenario_json:
        raise RuntimeError(
            f"{case.label()}: the scenario changed in this tree; the kept answer does not apply"
        )
    try:
        if case.kind == "single":
            return _compare_single(scenario, case.preset, answer.outcome)
        return _compare_steps(scenario, case.preset, answer.outcome)
    except Exception as error:  # noqa: BLE001  (the mutant broke simulate: the CI run would fail)
        frames = traceback.extract_tb(error.__traceback__)
        last = next((f for f in reversed(frames) if f.filename.startswith(str(REPO_ROOT))), frames[-1])
        return {"what": f"simulate raised {type(error).__name__}: {error} ({last.filename}:{last.lineno})"}


def _compare_single(scenario, preset: str, theirs) -> dict | None:
    from conformance.compare import disagreements

    found = disagreements(scenario, preset, theirs)
    if not found:
        return None
    first = found[0]
    return {
        "what": f"{first.request_id} [{first.mode}]: engine {first.engine.cached_tokens}, simulate "
        f"{first.simulated.cached_tokens}",
        "requests_differ": len({d.request_id for d in found}),  # in replay or timed mode
        "requests": len(theirs),
    }


def _compare_steps(scenario, preset: str, theirs) -> dict | None:
    from conformance.compare_steps import simulated_steps
    from conformance.trajectory import first_difference

    mine = simulated_steps(scenario, preset)
    difference = first_difference(theirs, mine)
    if difference is None:
        return None
    pairs = zip(theirs.steps, mine.steps, strict=False)
    steps_differ = sum(a != b for a, b in pairs) + abs(len(theirs.steps) - len(mine.steps))
    requests_differ = sum(theirs.requests[r] != mine.requests.get(r) for r in theirs.requests)
    return {
        "what": difference.describe()[:300],
        "requests_differ": requests_differ,
        "requests": len(theirs.requests),
        "steps_differ": steps_differ,
        "steps": len(theirs.steps),
    }


def check(answers: dict[Case, Answer], kinds: tuple[str, ...], go_on: bool) -> dict:
    compared, caught = 0, []
    for case, answer in answers.items():
        if case.kind not in kinds or answer.skipped:
            continue
        compared += 1
        found = compare_case(case, answer)
        if found is not None:
            caught.append({"case": case.label(), "kind": case.kind, **found})
            if not go_on:
                break
    return {
        "caught": bool(caught),
        "compared": compared,
        "first": caught[0] if caught else None,
        "cases_differ": len(caught),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", type=Path, action="append", required=True, help="kept answers (repeat)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which kinds of case to compare")
    parser.add_argument("--all", action="store_true", help="compare every case, not only to the first catch")
    args = parser.parse_args(argv)
    answers: dict[Case, Answer] = {}
    for path in args.oracle:
        answers.update(load_answers(path))
    kinds = tuple(args.kinds.split(","))
    ordered = dict(sorted(answers.items(), key=lambda item: KINDS.index(item[0].kind)))
    import sim  # the tree checked is the one imported: the harness verifies it

    print(json.dumps({**check(ordered, kinds, args.all), "sim": sim.__file__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
