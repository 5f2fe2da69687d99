"""The vllm preset against vLLM 0.33.0: `simulate` (replay and timed) gives vLLM's cached tokens on every request
of generated scenarios, with and without pool pressure. Against vLLM's own code when it is installed
(conformance/requirements.txt), and always against the reference model of docs/vllm-rules.md
(tests/conformance/vllm_reference.py, itself held to vLLM by test_vllm_reference.py)."""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.compare import MODES, simulated
from conformance.generate import generate
from conformance.generate_pools import vllm_blocks
from tests.conformance import vllm_reference

needs_vllm = pytest.mark.skipif(find_spec("vllm") is None, reason="vLLM 0.33.0 is not installed "
                                "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)")


def _against_reference(seeds: range) -> list[str]:
    found = []
    for seed in seeds:
        for pressure in (False, True):
            scenario = generate("vllm", seed, pressure)
            if len(set(vllm_blocks(scenario.config))) > 1:
                continue  # the reference model has one block size (vllm-rules.md section 2 has the rest)
            try:
                expected = vllm_reference.run(scenario)
            except NotImplementedError:  # vLLM preempts there; the reference does not model it
                continue
            for mode in MODES:
                ours = simulated(scenario, "vllm", mode)
                found += [f"{scenario.name} {mode} {rid}: rules {want.cached_tokens}, simulate {ours[rid]}"
                          for rid, want in expected.items() if (ours[rid].served, ours[rid].cached_tokens)
                          != (True, want.cached_tokens)]
    return found


def test_simulate_gives_the_rules_hits():
    assert _against_reference(range(40)) == []


@pytest.mark.slow
def test_simulate_gives_the_rules_hits_on_many_seeds():
    assert _against_reference(range(40, 1000)) == []


@needs_vllm
def test_simulate_gives_vllms_hits():
    from conformance.suite import run_suite

    result = run_suite("vllm", range(12))
    assert result.all_equal, [(s.name, d) for s, _, d in result.found]
    assert sum(n for key, n in result.counts.items() if key[-1] == "requests") > 150


@needs_vllm
@pytest.mark.slow
def test_simulate_gives_vllms_hits_on_200_seeds():
    from conformance.suite import run_suite

    result = run_suite("vllm", range(200))
    assert result.all_equal, [(s.name, d) for s, _, d in result.found]
