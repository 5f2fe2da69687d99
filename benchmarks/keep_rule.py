"""The keep rule's one-process half, measured: a speed switch flipped on and off in one process, or a run with
bounds against the same run without, round after round on the first N requests of the conversation trace.

    python benchmarks/keep_rule.py switch misses_spans.PER_REQUEST marconi-vllm:replay --limit 4000 --rounds 10
    python benchmarks/keep_rule.py bounds no-cache:replay --limit 4000 --rounds 8

A case is ``policy:mode`` (``replay`` or ``timed``). Each round runs the two sides in turn, their order swapped
every round (a side that always ran second would ride the first's warm caches), and prints their CPU seconds
(``time.process_time``, the collector run before each side) and the ratio. A warm-up round runs first and is not
counted. The first round also compares both sides' tables by hash: a switch that changes an output is an error.

``switch``: the ratio is on / off for ``module.NAME``, a module attribute under ``sim/`` (``misses_spans.PER_REQUEST``
or ``sim.cache.misses_spans.PER_REQUEST``); with ``HYBRIDCACHE_COMPILED`` set the compiled build's module is
flipped. Round 33's keep rule asks >= 8 of >= 10 rounds below 1 and a median <= 0.98 (and fresh-process pairs,
not measured here). ``bounds``: the ratio is with bounds / without; Issue 24 asks <= 1.25.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.real_traces import existing_trace, mooncake_trace  # noqa: E402
from sim.engines.registry import policy_names  # noqa: E402
from sim.run.simulate import SimConfig, simulate  # noqa: E402
from sim.trace.azure_import import import_mooncake  # noqa: E402

KEEP_MEDIAN = 0.98
KEEP_BELOW_ONE = 0.8  # of the counted rounds
BOUNDS_LIMIT = 1.25


def parse_case(case: str) -> tuple[str, str]:
    policy, _, mode = case.partition(":")
    if mode not in ("replay", "timed"):
        raise SystemExit(f"case {case!r}: expected policy:mode, mode replay or timed")
    if policy not in policy_names():
        raise SystemExit(f"case {case!r}: unknown policy {policy!r}; choose from {', '.join(policy_names())}")
    return policy, mode


def resolve_switch(spec: str) -> tuple[ModuleType, str]:
    """``module.NAME`` to the imported module and the attribute's name; a clear error where either is missing."""
    module_name, _, name = spec.rpartition(".")
    if not module_name or not name:
        raise SystemExit(f"switch {spec!r}: expected module.NAME, e.g. misses_spans.PER_REQUEST")
    if not module_name.startswith("sim."):
        found = sorted((REPO / "sim").rglob(f"{module_name.replace('.', '/')}.py"))
        if len(found) != 1:
            where = ", ".join(str(p.relative_to(REPO)) for p in found) or "no file"
            raise SystemExit(
                f"switch {spec!r}: module {module_name!r} names {where} under sim/; give its dotted path"
            )
        module_name = ".".join(found[0].relative_to(REPO).with_suffix("").parts)
    module = importlib.import_module(module_name)
    if not isinstance(getattr(module, name, None), bool):
        raise SystemExit(f"switch {spec!r}: {module_name} has no bool attribute {name!r}")
    return module, name


def tables_hash(result) -> str:
    text = result.requests.to_csv() + result.steps.to_csv() + repr(sorted(result.summary.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def timed_side(trace, cases: list[tuple[str, str]], bounds: bool) -> tuple[float, list[str]]:
    """The CPU seconds of every case run once, and each case's tables hash."""
    gc.collect()
    spent_s, hashes = 0.0, []
    for policy, mode in cases:
        started_at = time.process_time()
        result = simulate(trace, SimConfig(policy=policy, mode=mode, bounds=bounds))
        spent_s += time.process_time() - started_at
        hashes.append(tables_hash(result))
    return spent_s, hashes


def measure(trace, cases, rounds: int, set_side, same_tables: bool) -> list[float]:
    """Rounds of side A against side B (``set_side(True)`` is A, and returns bounds on or off), the order swapped
    each round; A / B a round. With ``same_tables`` the two sides' first tables must be equal."""
    ratios = []
    for number in range(rounds + 1):
        spent = {}
        for side in (True, False) if number % 2 == 0 else (False, True):
            bounds = set_side(side)
            spent[side] = timed_side(trace, cases, bounds)
        if same_tables and number == 0 and spent[True][1] != spent[False][1]:
            raise SystemExit(f"the two sides' tables differ: {spent[True][1]} against {spent[False][1]}")
        ratio = spent[True][0] / max(spent[False][0], 1e-9)
        label = "warm-up, not counted" if number == 0 else f"round {number}"
        print(f"{label:22} A {spent[True][0]:.4f} s  B {spent[False][0]:.4f} s  A/B {ratio:.4f}", flush=True)
        if number:
            ratios.append(ratio)
    return ratios


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["switch", "bounds"])
    parser.add_argument("args", nargs="+", help="switch: module.NAME then cases; bounds: cases")
    parser.add_argument("--limit", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--trace", default=None, help="a Mooncake JSONL (default: the conversation trace)")
    options = parser.parse_args(argv)
    if options.limit < 1 or options.rounds < 1:
        raise SystemExit("--limit and --rounds must be at least 1")
    switch = resolve_switch(options.args[0]) if options.what == "switch" else None
    cases = [parse_case(case) for case in options.args[1 if switch else 0 :]]
    if not cases:
        raise SystemExit("name at least one case, policy:mode")
    path = existing_trace(options.trace or mooncake_trace("conversation"))
    trace = import_mooncake(str(path), limit=options.limit, chains=True)
    if switch is not None:
        module, name = switch
        original = getattr(module, name)

        def set_side(on: bool) -> bool:
            setattr(module, name, on)
            return False

        print(f"A: {module.__name__}.{name} on, B: off ({module.__file__})")
        try:
            ratios = measure(trace, cases, options.rounds, set_side, same_tables=True)
        finally:
            setattr(module, name, original)
        below = sum(r < 1 for r in ratios)
        median = statistics.median(ratios)
        verdict = median <= KEEP_MEDIAN and below >= KEEP_BELOW_ONE * len(ratios)
        print(
            f"on/off median {median:.4f}, {below} of {len(ratios)} below 1: one-process half {'met' if verdict else 'not met'}"
        )
    else:
        print("A: with bounds, B: without")
        ratios = measure(trace, cases, options.rounds, lambda on: on, same_tables=False)
        within = sum(r <= BOUNDS_LIMIT for r in ratios)
        print(
            f"bounds/without median {statistics.median(ratios):.4f}, {within} of {len(ratios)} <= {BOUNDS_LIMIT}"
        )


if __name__ == "__main__":
    main()
