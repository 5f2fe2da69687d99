"""Conformance scenarios: a small trace served one request at a time, with the engine's knobs and pools.

A scenario is engine-neutral data (JSON-able): the drivers turn it into the engine's own objects, and
``compare`` turns it into a ``simulate`` run. Requests are served strictly one after another (each is
submitted when the previous one has finished), in file order; in the trace every request after the first
is a closed-loop follower of the one before it (``after``, think time 0), so the timed engine serves
them the same way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from sim.trace import Trace, request_to_dict
from sim.trace.checks import check_requests  # noqa: F401  (the trace is checked when built)


@dataclass(frozen=True)
class EngineConfig:
    """What the engine is started with. Lengths are in tokens."""

    components: str  # "full+swa", "full+mamba" or "full+swa+mamba"
    page_size: int
    window: int  # SWA window (0 without SWA)
    track_interval: int  # MAMBA decode checkpoint interval (SGLang --mamba-track-interval)
    mamba_chunk: int  # the scan's chunk (FLA: 64); SGLang's checkpoint grid is lcm(max(chunk, page), page)
    chunked_prefill_size: int
    swa_eviction_interval: int  # SGLang/FreeToken: 128
    full_tokens: int  # FULL pool, tokens
    swa_tokens: int  # SWA pool, tokens (0 without SWA)
    mamba_states: int  # MAMBA pool, states (0 without MAMBA)
    overlap: bool = True  # FreeToken: the overlap scheduler; vLLM: async scheduling (both their defaults)
    # vLLM only (the others ignore these): page_size is its block size for every group, chunked_prefill_size
    # its max_num_batched_tokens, and all groups draw from one pool of num_blocks blocks (the null block included,
    # as --num-gpu-blocks-override counts it); the *_tokens / mamba_states pools above do not apply.
    num_blocks: int = 0
    retention_interval: int | None = (
        0  # --prefix-cache-retention-interval: None dense, 0 replay+junction, n>0
    )
    prefill_checkpoints: bool = False  # Mamba writes checkpoints inside prefill chunks (GDN with FlashInfer)
    max_model_len: int = 0  # the startup check: one request this long must fit in the pool
    # vLLM only: KV heads of the FULL and SWA layers (bytes per token by layer type; gemma-4's SWA layers
    # store twice what its FULL layers do, so vLLM gives the groups different block sizes)
    full_kv_heads: int = 1
    swa_kv_heads: int = 1
    long_prefill_threshold: int = 0  # vLLM: long_prefill_token_threshold (0: none, its default)
    schedule_policy: str = "fcfs"  # SGLang: --schedule-policy
    mixed_chunk: bool = False  # SGLang: --enable-mixed-chunk
    max_running: int = 0  # SGLang --max-running-requests, vLLM --max-num-seqs (0: not given, the default)
    disable_radix_cache: bool = False  # SGLang --disable-radix-cache (the sim's no-cache preset)

    @property
    def has_swa(self) -> bool:
        return "swa" in self.components.split("+")

    @property
    def has_mamba(self) -> bool:
        return "mamba" in self.components.split("+")


@dataclass(frozen=True)
class Scenario:
    name: str  # e.g. "sglang-17-fanout"
    engine: str  # "sglang" | "freetoken" | "vllm"
    seed: int
    kind: str  # the generator's shape: fanout, multiturn, diverge, repeat, mixed
    pressure: bool  # pools small enough that the engine must evict
    config: EngineConfig
    trace_lines: tuple[str, ...] = field(default=())  # the trace, one JSON object a line

    def trace(self) -> Trace:
        return Trace(_request_from_json(line) for line in self.trace_lines)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Scenario":
        data = json.loads(text)
        data["config"] = EngineConfig(**data["config"])
        data["trace_lines"] = tuple(data["trace_lines"])
        return cls(**data)


class ServedRequest(NamedTuple):
    """One request as the drivers see it: token ids (small ints, equal where the trace's tokens are equal)."""

    request_id: str
    prompt: list[int]
    output: list[int]  # every output token; the engine computes KV for all but the last


class EngineOutcome(NamedTuple):
    """What the engine itself reported for one request."""

    cached_tokens: int  # the engine's own count of reused prompt tokens (its cache report)
    served: bool = True  # False: the engine refused or aborted it (``note`` says why)
    note: str = ""


def served_requests(scenario: Scenario) -> list[ServedRequest]:
    """The scenario's requests in serving order, with token ids remapped to 1, 2, 3, ... in order of first
    appearance (a bijection of the trace's 63-bit ids, so equality, and thus every cache decision, is
    unchanged, while the engines get ids that fit any vocabulary-sized integer type)."""
    trace = scenario.trace()
    remap: dict[int, int] = {}
    served = []
    for request in trace:
        ids = [remap.setdefault(int(t), len(remap) + 1) for t in trace.request_seq(request.id).token_ids()]
        prompt_len = trace.prompt_len(request.id)
        served.append(ServedRequest(request.id, ids[:prompt_len], ids[prompt_len:]))
    return served


def arrival_steps(scenario: Scenario) -> list[int]:
    """Each request's arrival on the step clock (a concurrent scenario's trace arrives open loop, at whole
    steps), in trace order."""
    steps = []
    for request in scenario.trace():
        if request.arrival is None or request.arrival != int(request.arrival):
            raise ValueError(f"{scenario.name}: request {request.id} does not arrive at a whole step")
        steps.append(int(request.arrival))
    return steps


def _request_from_json(line: str):
    from sim.trace.jsonl import _parse_request  # one parser for every trace line

    return _parse_request(line, "<scenario>", 0)


def trace_lines(requests: list[dict]) -> tuple[str, ...]:
    """Request dicts as canonical trace lines (the same key order ``write_trace`` uses)."""
    return tuple(
        json.dumps(request_to_dict(_request_from_json(json.dumps(r))), separators=(", ", ": "))
        for r in requests
    )


def one_at_a_time(requests: list[dict]) -> list[dict]:
    """Serve one at a time: the first arrives at 0, each later one follows the one before it."""
    chained = []
    for index, request in enumerate(requests):
        request = dict(request)
        if index == 0:
            request["arrival"] = 0.0
        else:
            request["after"] = requests[index - 1]["id"]
        chained.append(request)
    return chained
