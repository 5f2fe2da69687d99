"""The CI's conformance set: every request of a fixed set of seeded scenarios, with and without pool pressure,
gets the same cached tokens from ``simulate`` (replay and timed) as from the engine's own code; with many
requests in flight (the concurrent scenarios), every step's batch and pools and every request's outcome agree. A change that
breaks exactness against SGLang, FreeToken or vLLM fails here. ``HYBRIDCACHE_CONFORMANCE_SEEDS`` widens the
set (the default keeps CI short; ``python cli.py conformance ENGINE --scenarios 200`` is the full check)."""
from __future__ import annotations

import os
from importlib.util import find_spec

import pytest

from conformance.generate_boundary import CI_SEEDS as BOUNDARY_SEEDS
from conformance.generate_boundary import KNOWN as BOUNDARY_KNOWN
from conformance.generate_boundary import generate_boundary
from conformance.generate_targeted import long_seeds, targeted_seeds
from conformance.spaced import ENGINES as SPACED
from conformance.spaced import KNOWN, generate_spaced
from conformance.suite import CONCURRENT, driver, report, run_suite
from conformance.suite_steps import report_steps, run_concurrent
from sim.engines.registry import PRESETS

NUM_SEEDS = int(os.environ.get("HYBRIDCACHE_CONFORMANCE_SEEDS", "30"))
PACKAGES = {"sglang": "sglang", "freetoken": "freetoken", "vllm": "vllm"}
# the step-clock families' seeds in interleaved shards, one test each, so pytest-xdist spreads the longest
# cases over its workers; every seed still runs, and each shard's floor on the scenarios compared is its share
# of the whole's, rounded up (all shards passing implies the whole's floor)
NUM_SHARDS = 2
SHARDS = [pytest.param(index, id=f"shard{index}of{NUM_SHARDS}") for index in range(NUM_SHARDS)]


def shard(seeds: list[int], index: int) -> list[int]:
    return seeds[index::NUM_SHARDS]


def share(floor: int) -> int:
    """A shard's part of ``floor``, rounded up."""
    return -(-floor // NUM_SHARDS)


def with_pressures(engines, slow_on_large_pools: set[str]) -> list:
    """(engine, pressure) for each engine, large pools and pressure (ids ``engine-large-pools``,
    ``engine-pressure``); the large-pools cases of ``slow_on_large_pools`` run under ``-m slow``: in their
    family, every mistake of benchmarks/conformance_mutants.jsonl that they catch is caught by the family's
    other default cases too (the evidence: docs/results/test-suite-time.md, Round 14)."""
    return [
        pytest.param(engine, pressure, id=f"{engine}-{label}",
                     marks=[pytest.mark.slow] if engine in slow_on_large_pools and not pressure else [])
        for engine in engines
        for pressure, label in ((False, "large-pools"), (True, "pressure"))
    ]


@pytest.mark.parametrize("engine, pressure", with_pressures(PACKAGES, {"freetoken", "vllm"}))
def test_every_request_agrees_with_the_engine(engine, pressure):
    if find_spec(PACKAGES[engine]) is None:
        pytest.skip(f"{engine} is not installed (pip install --no-deps -c constraints-cpu.txt -r "
                    f"conformance/requirements.txt)")
    if engine not in {p.engine for p in PRESETS.values()}:
        pytest.skip(f"the simulator has no {engine} preset yet")
    result = run_suite(engine, range(NUM_SEEDS), (pressure,))
    assert result.all_equal, report(result)
    assert sum(v for k, v in result.counts.items() if k[3] == "requests") > 2 * NUM_SEEDS


@pytest.mark.parametrize("pressure", [False, True], ids=["large-pools", "pressure"])
@pytest.mark.parametrize("engine", CONCURRENT)
def test_every_step_agrees_with_the_engine_under_concurrent_load(engine, pressure):
    if find_spec(PACKAGES[engine]) is None:
        pytest.skip(f"{engine} is not installed (pip install --no-deps -c constraints-cpu.txt -r "
                    f"conformance/requirements.txt)")
    result = run_concurrent(driver(engine, concurrent=True), range(NUM_SEEDS), (pressure,))
    assert result.all_equal, report_steps(result)
    compared = sum(v for k, v in result.counts.items() if k[2] == "scenarios")
    assert compared >= NUM_SEEDS  # the engine's own corruptions leave most scenarios compared


@pytest.mark.parametrize("part", SHARDS)
@pytest.mark.parametrize("engine, pressure", with_pressures(SPACED, {"sglang", "freetoken"}))
def test_every_step_agrees_one_request_at_a_time(engine, pressure, part):
    """The one-at-a-time scenarios on the step clock: each step's chunks and the pools after it (free and
    tree-held), not only each request's cached tokens."""
    if find_spec(PACKAGES[engine]) is None:
        pytest.skip(f"{engine} is not installed (pip install --no-deps -c constraints-cpu.txt -r "
                    f"conformance/requirements.txt)")
    seeds = [*range(NUM_SEEDS), *long_seeds(engine)]  # and the boundary family's 16k-32k-token prompts
    result = run_concurrent(driver(engine, concurrent=True), shard(seeds, part), (pressure,), make=generate_spaced)
    found = {(scenario.engine, scenario.seed, scenario.pressure) for scenario, _, _ in result.found}
    assert found <= set(KNOWN), report_steps(result)  # the open differences are listed with their reasons
    compared = sum(v for k, v in result.counts.items() if k[2] == "scenarios")
    assert compared >= share(NUM_SEEDS // 2)  # FreeToken refuses its three-component scenarios up front


@pytest.mark.parametrize("part", SHARDS)
@pytest.mark.parametrize("engine, pressure", with_pressures(CONCURRENT, {"freetoken", "vllm"}))
def test_every_step_agrees_at_the_rules_boundaries(engine, pressure, part):
    """The boundary family: lengths, windows and pools at every boundary the rules name (+-1), identical
    prompts in one step, up to 40 requests over shared prefixes (conformance/generate_boundary.py)."""
    if find_spec(PACKAGES[engine]) is None:
        pytest.skip(f"{engine} is not installed (pip install --no-deps -c constraints-cpu.txt -r "
                    f"conformance/requirements.txt)")
    # and the built-on-purpose ones, and 16k-32k-token prompts
    seeds = [*range(min(NUM_SEEDS, BOUNDARY_SEEDS)), *targeted_seeds(engine), *long_seeds(engine)]
    result = run_concurrent(driver(engine, concurrent=True), shard(seeds, part), (pressure,), make=generate_boundary)
    found = {(scenario.engine, scenario.seed, scenario.pressure) for scenario, _, _ in result.found}
    assert found <= set(BOUNDARY_KNOWN), report_steps(result)  # the open differences, listed with their reasons
    compared = sum(v for k, v in result.counts.items() if k[2] == "scenarios")
    assert compared >= share(len(seeds) // 2)  # FreeToken's own double frees leave most scenarios compared


NUM_MODE_SEEDS = int(os.environ.get("HYBRIDCACHE_CONFORMANCE_MODE_SEEDS", "8"))
SGLANG_MODES = {
    "no-overlap": {"overlap": False},
    "lpm": {"schedule_policy": "lpm"},
    "lof": {"schedule_policy": "lof"},
    "dfs-weight": {"schedule_policy": "dfs-weight"},
    "hrrn": {"schedule_policy": "hrrn"},
    "mixed-chunk": {"mixed_chunk": True},
}


@pytest.mark.parametrize("pressure", [False, True], ids=["large-pools", "pressure"])
@pytest.mark.parametrize("mode", list(SGLANG_MODES))
def test_sglangs_other_modes_agree_under_concurrent_load(mode, pressure):
    """SGLang's non-default modes (``cli.py conformance sglang --concurrent --no-overlap``, ``--schedule-policy
    lpm|lof|dfs-weight|hrrn``, ``--mixed-chunk``) on the first seeds of the concurrent scenarios, as shipped (sglang-retain)."""
    if find_spec("sglang") is None:
        pytest.skip("sglang is not installed (pip install --no-deps -c constraints-cpu.txt -r "
                    "conformance/requirements.txt)")
    from conformance.generate_concurrent import generate_concurrent
    from conformance.modes import forced

    make = forced(generate_concurrent, "sglang", SGLANG_MODES[mode])
    result = run_concurrent(driver("sglang", concurrent=True), range(NUM_MODE_SEEDS), (pressure,),
                            ("sglang-retain",), make)
    assert result.all_equal, report_steps(result)
    assert sum(v for k, v in result.counts.items() if k[2] == "scenarios") == NUM_MODE_SEEDS
