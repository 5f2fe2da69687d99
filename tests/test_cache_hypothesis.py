"""The tree's match equals the brute-force reference on random fan-out and multi-turn scenarios,
for every preset, with ``check_integrity()`` after every operation."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes
from sim.engines.registry import PRESETS, make_manager, make_policy
from sim.models import get_model
from sim.tokens import TokenSeq
from tests.cache_reference import reference_match

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))
KINDS = [("full",), ("swa", "full"), ("mamba", "full"), ("swa", "mamba", "full")]


@st.composite
def scenarios(draw):
    page = draw(st.sampled_from([1, 2, 4, 8]))
    kinds = draw(st.sampled_from(KINDS))
    window = draw(st.sampled_from([4, 8, 16, 24])) if "swa" in kinds else 0
    model = replace(get_model("tiny"), layer_kinds=kinds, window=window,
                    mamba_chunk=draw(st.sampled_from([2, 4, 8])))
    knobs = dict(page_size=page, track_interval=page * draw(st.integers(1, 4)),
                 swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
                 swa_eviction_interval=draw(st.sampled_from([1, 4, 16])))
    sizes = PoolSizes(draw(st.integers(4, 60)), draw(st.integers(4, 60)), draw(st.integers(2, 12)))
    requests = draw(st.lists(_request(), min_size=2, max_size=10))
    ops = draw(st.lists(st.integers(0, 99), min_size=10, max_size=400))
    chunk = draw(st.integers(1, 48))
    return model, knobs, sizes, requests, ops, chunk


@st.composite
def _request(draw):
    system = f"sys{draw(st.integers(0, 2))}"
    parts = [(system, draw(st.sampled_from([6, 17, 33])))]
    for _ in range(draw(st.integers(0, 2))):  # earlier turns: shared user messages and outputs
        parts.append((f"u{draw(st.integers(0, 3))}", draw(st.integers(1, 20))))
    parts.append((f"q{draw(st.integers(0, 5))}", draw(st.integers(1, 25))))
    return parts, draw(st.integers(1, 20))


class Driver:
    """Runs requests concurrently, one operation at a time, as a scheduler would."""

    def __init__(self, manager: CacheManager, chunk: int):
        self.manager, self.chunk, self.active, self.iteration = manager, chunk, {}, 0

    def start(self, rid: str, prompt: TokenSeq, output_len: int) -> None:
        tokens = prompt + TokenSeq.of("o:" + rid, output_len)
        expected = reference_match(self.manager, tokens, len(prompt))
        result = self.manager.admit(rid, tokens, len(prompt))
        if isinstance(result, Refusal):
            return
        assert (result.match.cached_len, result.match.full_depth) == expected
        self.active[rid] = [len(prompt), output_len - 1]

    def step(self, pick: int) -> None:
        rid = sorted(self.active)[pick % len(self.active)]
        prompt_len, decodes_left = self.active[rid]
        req = self.manager.requests[rid]
        self.iteration += 1
        if req.kv_len < prompt_len:
            size = min(self.chunk, prompt_len - req.kv_len)
            self._run(rid, self.manager.prepare_prefill(rid, size, self.iteration),
                      lambda: self.manager.complete_prefill(rid, size))
        elif decodes_left > 0:
            self.active[rid][1] -= 1
            self._run(rid, self.manager.prepare_decode(rid, self.iteration),
                      lambda: self.manager.complete_decode(rid))
        else:
            self.manager.finish(rid)
            del self.active[rid]

    def _run(self, rid, plan, complete) -> None:
        if isinstance(plan, Refusal):
            self.manager.abort(rid)
            del self.active[rid]
        else:
            complete()


# the radix presets (vllm runs its own cache manager: tests/test_vllm_manager.py checks its integrity)
SOUND_PRESETS = [name for name in PRESETS if not name.startswith("broken-") and PRESETS[name].engine != "vllm"]


@pytest.mark.parametrize("preset", SOUND_PRESETS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_match_equals_reference_with_integrity(preset, scenario):
    model, knobs, sizes, requests, ops, chunk = scenario
    manager = make_manager(model, make_policy(preset, **knobs), sizes)
    driver = Driver(manager, chunk)
    pending = list(enumerate(requests))
    for op in ops:
        if pending and (op < 30 or not driver.active):
            index, (parts, output_len) = pending.pop(0)
            prompt = TokenSeq([("r:" + ref, 0, length) for ref, length in parts])
            driver.start(f"r{index}", prompt, output_len)
        elif driver.active:
            driver.step(op)
        manager.check_integrity()
    for rid in list(driver.active):
        manager.finish(rid)
    manager.check_integrity()
    assert not manager.requests
