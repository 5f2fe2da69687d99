"""vLLM's align-mode Mamba split for a preempted request replaying its outputs (``Scheduler.
_mamba_block_aligned_split``): its prefill ends at ``num_tokens - 1`` (``prefill_end``), so the internal
prefill checkpoint is judged below that end and the replay stops at the last cacheable boundary below
``num_tokens``; its last token is decoded. Pinned with vLLM 0.33.0's answer on the scenario the boundary family
drew (first draft of seed 7 under pressure; tests/conformance runs vLLM on the family)."""

from __future__ import annotations

from conformance.compare_steps import simulated_steps
from conformance.scenario import EngineConfig, Scenario, trace_lines
from sim.cache.blocks.chunks import aligned_end, replay_end

# r5 (316 prompt tokens) was preempted and replays 69 outputs: 385 tokens, 320 computed again at step 831
SYSTEM, OWN = 127, {"r7": 199, "r2": 144, "r3": 11, "r0": 171, "r1": 19, "r4": 94, "r5": 189, "r6": 104}
OUTPUTS = {"r7": 279, "r2": 126, "r3": 233, "r0": 105, "r1": 267, "r4": 379, "r5": 331, "r6": 335}
ARRIVALS = {"r7": 0, "r2": 1, "r3": 1, "r0": 2, "r1": 2, "r4": 2, "r5": 2, "r6": 2}


def _scenario() -> Scenario:
    config = EngineConfig(
        components="full+mamba",
        page_size=64,
        window=0,
        track_interval=64,
        mamba_chunk=64,
        chunked_prefill_size=8192,
        swa_eviction_interval=128,
        full_tokens=1344,
        swa_tokens=0,
        mamba_states=6,
        num_blocks=18,
        prefill_checkpoints=True,
        max_model_len=768,
    )
    requests = [
        {
            "id": rid,
            "arrival": float(ARRIVALS[rid]),
            "prompt": [{"ref": "sys", "len": SYSTEM}, {"ref": rid, "len": OWN[rid]}],
            "output_len": OUTPUTS[rid],
        }
        for rid in OWN
    ]
    return Scenario("vllm-replay", "vllm", 7, "boundary-retract", True, config, trace_lines(requests))


def test_the_replay_ends_one_token_short_of_its_tokens():
    assert replay_end(316, 385) == 384 and replay_end(316, 316) == 316 and replay_end(0, 385) == 385
    # the internal checkpoint at 320 is not inside [320, 385): the replay stops at 384, vLLM's 64 tokens
    assert aligned_end(64, 320, 385, 385, 0, 8192, True, replay_end(316, 385)) == 384
    assert aligned_end(64, 320, 385, 385, 0, 8192, True) == 385  # judged as a prompt, it would not stop


def test_simulate_replays_what_vllm_replayed():
    run = simulated_steps(_scenario(), "vllm")
    batches = {step.at: step.batch for step in run.steps}
    assert batches[831] == (("r5", 320, True), ("r6", 64, True))
    assert batches[832] == (("r5", 64, True), ("r6", 167, True))
    assert batches[833] == (("r5", 1, False), ("r6", 1, False))
    assert run.requests["r5"].finished_at == 1095
