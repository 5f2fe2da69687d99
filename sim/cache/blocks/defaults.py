"""What ``vllm serve`` decides from the GPU it runs on (docs/vllm-rules.md section 1), for the GPU presets of
``sim/cost.py``: the batch defaults (``engine/arg_utils.py:EngineArgs.get_batch_defaults``: by device memory)
and the GDN prefill backend (``qwen_gdn_linear_attn.py:_resolve_gdn_prefill_backend``: FlashInfer on Hopper,
which writes Mamba checkpoints inside prefill chunks; Triton elsewhere)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from sim.cache.policy import Policy


class DeviceFacts(NamedTuple):
    memory_gib: float  # what torch reports as the device's total memory
    hopper: bool  # SM90


# vLLM's CPU platform is not a GPU: it gets the small tier, like any device under 70 GiB
DEVICES = {
    "h200": DeviceFacts(139.8, True),
    "h100": DeviceFacts(79.6, True),
    "rtx4090": DeviceFacts(23.6, False),
    "cpu": DeviceFacts(0.0, False),
}


def batch_defaults(memory_gib: float) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of ``vllm serve`` (the OpenAI server's usage context)."""
    if memory_gib >= 160:
        return 16384, 1024
    if memory_gib >= 70:  # H100 / H200 (an A100 of 80 GB stays on the small tier; no preset here is one)
        return 8192, 1024
    return 2048, 256


def settle_for_gpu(policy: Policy, gpu: str, given: AbstractSet[str]) -> Policy:
    """The vLLM policy as ``vllm serve`` runs it on ``gpu``: every knob the user did not give that vLLM
    derives from the device takes the device's value."""
    facts = DEVICES.get(gpu)
    if facts is None:
        raise ValueError(f"no vLLM defaults for gpu {gpu!r}; known: {', '.join(DEVICES)}")
    tokens, seqs = batch_defaults(facts.memory_gib)
    derived: dict[str, Any] = {
        "chunked_prefill_size": tokens,
        "max_running_requests": seqs,
        "prefill_checkpoints": facts.hopper,
    }
    return policy.with_knobs(**{name: value for name, value in derived.items() if name not in given})
