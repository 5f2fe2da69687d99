"""docs/vllm-rules.md against vLLM 0.33.0: the reference model written from the document
(tests/conformance/vllm_reference.py) gives the engine's cached tokens, request by request."""
from __future__ import annotations

from importlib.util import find_spec

import pytest

from conformance.engines import vllm as engine
from conformance.generate import generate
from conformance.generate_pools import vllm_blocks
from tests.conformance import vllm_reference

pytestmark = pytest.mark.skipif(find_spec("vllm") is None, reason="vLLM 0.33.0 is not installed "
                                "(pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)")


def _disagreements(seeds: range, async_scheduling: bool = True) -> list[str]:
    found = []
    for seed in seeds:
        for pressure in (False, True):
            scenario = generate("vllm", seed, pressure)
            if len(set(vllm_blocks(scenario.config))) > 1:
                continue  # the reference model has one block size (vllm-rules.md section 2 has the rest)
            vllm = engine.run(scenario, async_scheduling=async_scheduling)
            ours = vllm_reference.run(scenario, async_scheduling)
            found += [f"{scenario.name} {rid}: vLLM {vllm[rid].cached_tokens}, rules {ours[rid].cached_tokens}"
                      for rid in vllm if vllm[rid] != ours[rid]]
    return found


def test_the_rules_give_vllms_hits():
    assert _disagreements(range(12)) == []


def test_the_rules_give_vllms_hits_without_async_scheduling():
    assert _disagreements(range(4), async_scheduling=False) == []


@pytest.mark.slow
def test_the_rules_give_vllms_hits_on_many_seeds():
    assert _disagreements(range(12, 300)) == []
