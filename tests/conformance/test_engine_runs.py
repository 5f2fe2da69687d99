"""One engine run per distinct run (conformance/engine_runs.py): presets that a driver's ``run_as`` maps to
one run give equal runs when each is run on its own, the presets whose change matters keep their own run,
and the suites' runner calls the engine once per distinct run and hands each preset that run (or its error).
"""
from __future__ import annotations

import importlib
from importlib.util import find_spec

import pytest

from conformance.engine_runs import engine_run
from conformance.generate import generate
from conformance.generate_boundary import generate_boundary
from conformance.generate_concurrent import generate_concurrent
from conformance.spaced import generate_spaced
from conformance.trajectory import EngineCorrupt, Trajectory

FAMILIES = {"one-at-a-time": generate, "concurrent": generate_concurrent, "spaced": generate_spaced,
            "boundary": generate_boundary}
DEFAULT = {"sglang": "sglang-retain", "freetoken": "freetoken"}
OTHER = {"sglang": "sglang", "freetoken": "freetoken-lazy"}
NUM_TOKENS = 6000  # the scenarios run twice here are small ones: their prompts and outputs, summed
NUM_PER_FAMILY = 2


def _scenarios(engine: str, make, shared: bool):
    """The small drawn scenarios the engine accepts whose two presets ``run_as`` maps to one run (or not)."""
    module = importlib.import_module(f"conformance.engines.{engine}")
    for pressure in (False, True):
        for seed in range(30):
            scenario = make(engine, seed, pressure)
            if module.accepts(scenario.config) is not None:
                continue
            trace = scenario.trace()
            if sum(trace.prompt_len(r.id) + r.output_len for r in trace) > NUM_TOKENS:
                continue
            if (module.run_as(scenario.config, OTHER[engine]) == DEFAULT[engine]) == shared:
                yield scenario


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("engine", list(DEFAULT))
def test_presets_run_as_one_run_run_alike(engine, family):
    """Each preset run on its own: where ``run_as`` says one run, the two runs are equal, step for step."""
    if find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed")
    module = importlib.import_module(f"conformance.engines.{engine}")
    function = "run" if family == "one-at-a-time" else "run_steps"
    scenarios = list(_scenarios(engine, FAMILIES[family], shared=True))[:NUM_PER_FAMILY]
    assert scenarios, "no small scenario shares a run"
    for scenario in scenarios:
        runs = [getattr(module, function)(scenario, preset) for preset in (DEFAULT[engine], OTHER[engine])]
        assert runs[0] == runs[1], scenario.name


@pytest.mark.parametrize("engine", list(DEFAULT))
def test_a_preset_whose_change_matters_keeps_its_own_run(engine):
    """SGLang with SWA and MAMBA (its floor moves), FreeToken with SWA (its trim runs): each preset its own."""
    module = importlib.import_module(f"conformance.engines.{engine}")
    matters = 0
    for make in FAMILIES.values():
        for pressure in (False, True):
            for seed in range(30):
                config = make(engine, seed, pressure).config
                moves = config.has_swa and (config.has_mamba or engine == "freetoken")
                for preset in (DEFAULT[engine], OTHER[engine]):
                    assert module.run_as(config, preset) == (preset if moves else DEFAULT[engine])
                matters += moves
    assert matters > 0
    assert module.run_as(generate(engine, 0).config, "no-such-preset") == "no-such-preset"


class _Driver:
    """A driver whose presets "a" and "b" share a run and "c" has its own; it counts its runs."""

    def __init__(self, corrupt: bool = False):
        self.calls: list[str] = []
        self.corrupt = corrupt

    def run_as(self, config, preset: str) -> str:
        return "a" if preset in ("a", "b") else preset

    def run_steps(self, scenario, preset: str) -> Trajectory:
        self.calls.append(preset)
        if self.corrupt:
            raise EngineCorrupt(f"{preset} broke", (), 3)
        return Trajectory((), {"r": preset})


def test_the_runner_runs_each_distinct_run_once():
    scenario, module, runs = generate("sglang", 0), _Driver(), {}
    outcomes = {preset: engine_run(module, "run_steps", scenario, preset, runs) for preset in ("b", "a", "c")}
    assert module.calls == ["a", "c"]  # "b" asked first: the run it stands for, "a", is what runs
    assert outcomes["a"] is outcomes["b"] and outcomes["c"].requests == {"r": "c"}
    assert engine_run(_Driver(), "run_steps", scenario, "b", {}).requests == {"r": "a"}  # a fresh scenario runs
    broken, runs = _Driver(corrupt=True), {}
    for preset in ("a", "b"):
        with pytest.raises(EngineCorrupt, match="a broke"):
            engine_run(broken, "run_steps", scenario, preset, runs)
    assert broken.calls == ["a"]


def test_a_driver_without_run_as_runs_every_preset():
    class Plain:
        calls: list[str] = []

        def run(self, scenario, preset):
            self.calls.append(preset)
            return {"r": preset}

    module, runs = Plain(), {}
    assert [engine_run(module, "run", generate("vllm", 0), p, runs) for p in ("a", "b")] == [{"r": "a"}, {"r": "b"}]
    assert module.calls == ["a", "b"]
