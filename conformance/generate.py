"""Seeded scenarios nobody tuned to: fan-out, multi-turn with outputs (whole, cut, reasoning dropped),
divergence near page / window / checkpoint / chunk boundaries, exact repeats, and mixes of them, over
random knobs each engine accepts; with ``pressure`` the pools are small enough that the engine evicts.

``generate(engine, seed, pressure)`` is a pure function of its arguments: the same triple gives the same
scenario on every machine.
"""

from __future__ import annotations

import random
from dataclasses import replace

from conformance.scenario import EngineConfig, Scenario, trace_lines

KINDS = ("fanout", "multiturn", "diverge", "repeat", "mixed")
_COMPONENTS = {
    "sglang": ("full+swa", "full+mamba", "full+swa+mamba"),
    "freetoken": ("full+swa", "full+mamba"),
    "vllm": ("full+swa", "full+mamba", "full+swa+mamba"),
}
_SGLANG_MIN_STATES = 5
# vLLM: 528 / 576 are what _align_hybrid_block_size derives for Qwen3.5-4B (Triton / FlashInfer GDN)
_PAGES = {"sglang": (16, 32, 64, 128), "freetoken": (1, 1, 4, 16, 64), "vllm": (16, 32, 64, 528, 576)}


def generate(engine: str, seed: int, pressure: bool = False) -> Scenario:
    if engine not in _COMPONENTS:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(_COMPONENTS)}")
    rng = random.Random(f"{engine}/{seed}/{pressure}")
    kind = rng.choice(KINDS)
    config = _config(rng, engine)
    requests = _requests(rng, kind, config)
    if engine == "vllm" and pressure:
        requests = _with_fillers(rng, config, requests)
    config = _with_pools(rng, config, requests, pressure, engine)
    if engine == "vllm":
        config = _with_vllm_pool(rng, config, requests, pressure)
    if engine == "sglang" and config.has_mamba and config.mamba_states < _SGLANG_MIN_STATES:
        # SGLang refuses to start below 5 states (3 + 2 ping-pong slots per running request)
        config = replace(config, mamba_states=_SGLANG_MIN_STATES)
    if engine == "freetoken":  # its default scheduler overlaps; the plain loop is a setting
        config = replace(config, overlap=rng.random() < 0.7)
    return Scenario(
        f"{engine}-{seed}{'-pressure' if pressure else ''}-{kind}",
        engine,
        seed,
        kind,
        pressure,
        config,
        trace_lines(_chained(requests)),
    )


def _config(rng: random.Random, engine: str) -> EngineConfig:
    components = rng.choice(_COMPONENTS[engine])
    page = rng.choice(_PAGES[engine])
    has_swa, has_mamba = "swa" in components, "mamba" in components
    if engine == "freetoken" and has_swa:
        page = 1  # FreeToken serves SWA models at page_size 1 only (its engine config refuses others)
    window = rng.choice((24, 64, 100, 128, 200, 256, 512)) if has_swa else 0
    chunk = 64
    grid = max(chunk, page)
    track = grid * rng.choice((1, 1, 2, 4)) if has_mamba else 256
    if has_mamba and rng.random() < 0.3:  # an interval the grid does not divide (SGLang rounds it up)
        track = page * rng.choice((3, 5, 6))
    prefill = page * rng.choice((4, 8, 16, 32, 64)) if rng.random() < 0.6 else 8192
    interval = rng.choice((16, 32, 128, 128))
    return EngineConfig(
        components,
        page,
        window,
        track,
        chunk,
        max(prefill, page),
        interval,
        full_tokens=0,
        swa_tokens=0,
        mamba_states=0,
    )


def _requests(rng: random.Random, kind: str, config: EngineConfig) -> list[dict]:
    if kind == "mixed":
        requests: list[dict] = []
        for part in range(rng.randint(2, 3)):
            requests += _requests_of(rng, rng.choice(KINDS[:-1]), config, f"p{part}")
        return requests
    return _requests_of(rng, kind, config, "p0")


def _requests_of(rng: random.Random, kind: str, config: EngineConfig, tag: str) -> list[dict]:
    make = {"fanout": _fanout, "multiturn": _multiturn, "diverge": _diverge, "repeat": _repeat}[kind]
    return make(rng, config, tag)


def _output_len(rng: random.Random) -> int:
    return rng.choice((1, 2, rng.randint(3, 64), rng.randint(64, 400), rng.randint(300, 700)))


def _fanout(rng: random.Random, config: EngineConfig, tag: str) -> list[dict]:
    system = rng.randint(60, 2500)
    return [
        {
            "id": f"{tag}-f{i}",
            "prompt": [
                {"ref": f"{tag}-sys", "len": system},
                {"ref": f"{tag}-q{i}", "len": rng.randint(1, 300)},
            ],
            "output_len": _output_len(rng),
        }
        for i in range(rng.randint(2, 5))
    ]


def _multiturn(rng: random.Random, config: EngineConfig, tag: str) -> list[dict]:
    requests: list[dict] = []
    prompt = [{"ref": f"{tag}-u0", "len": rng.randint(30, 2000)}]
    for turn in range(rng.randint(2, 4)):
        request = {"id": f"{tag}-t{turn}", "prompt": list(prompt), "output_len": _output_len(rng)}
        requests.append(request)
        out = request["output_len"]
        way = rng.choice(("whole", "whole", "cut", "skip"))
        if way == "whole" or out < 3:
            prompt = prompt + [{"output_of": request["id"]}]
        elif way == "cut":
            prompt = prompt + [{"output_of": request["id"], "len": rng.randint(1, out - 1)}]
        else:  # a client that drops the reasoning: only the answer after it comes back
            skip = rng.randint(1, out - 1)
            prompt = prompt + [{"output_of": request["id"], "skip": skip}]
        prompt = prompt + [{"ref": f"{tag}-u{turn + 1}", "len": rng.randint(1, 200)}]
    return requests


def _diverge(rng: random.Random, config: EngineConfig, tag: str) -> list[dict]:
    """Request 2 shares request 1's first D tokens, D within a few tokens of a boundary."""
    first_len = rng.randint(200, 3000)
    units = [
        config.page_size,
        config.chunked_prefill_size,
        config.window or config.page_size,
        config.track_interval,
        config.mamba_chunk,
    ]
    unit = max(1, rng.choice(units))
    base = rng.choice((unit * rng.randint(1, max(1, first_len // unit)), first_len, first_len - 16))
    shared = max(1, min(first_len, base + rng.choice((-17, -16, -2, -1, 0, 0, 1, 2, 15, 16))))
    second = [{"ref": f"{tag}-a", "len": shared}, {"ref": f"{tag}-b", "len": rng.randint(1, 400)}]
    return [
        {
            "id": f"{tag}-d0",
            "prompt": [{"ref": f"{tag}-a", "len": first_len}],
            "output_len": _output_len(rng),
        },
        {"id": f"{tag}-d1", "prompt": second, "output_len": _output_len(rng)},
    ]


def _repeat(rng: random.Random, config: EngineConfig, tag: str) -> list[dict]:
    length = rng.randint(10, 2500)
    return [
        {
            "id": f"{tag}-r{i}",
            "prompt": [{"ref": f"{tag}-same", "len": length}],
            "output_len": _output_len(rng),
        }
        for i in range(rng.randint(2, 3))
    ]


def _chained(requests: list[dict]) -> list[dict]:
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


def _with_pools(
    rng: random.Random, config: EngineConfig, requests: list[dict], pressure: bool, engine: str = ""
) -> EngineConfig:
    from dataclasses import replace

    lengths = _lengths(config, requests)
    page = config.page_size
    longest = -(-max(lengths) // page) * page
    total = -(-sum(lengths) // page) * page + page * len(lengths)
    if pressure:
        full = longest + page * rng.randint(2, 8) + rng.randint(0, longest)
        swa = (
            (config.window + config.chunked_prefill_size + page * rng.randint(2, 6)) if config.has_swa else 0
        )
        states = rng.randint(4, 8) if config.has_mamba else 0
        if engine == "freetoken" and config.has_swa:
            swa = max(swa, _freetoken_swa_floor(config))
    else:
        full = total * 2
        swa = total * 2 if config.has_swa else 0
        states = 4 * len(lengths) + 64 if config.has_mamba else 0
    full = -(-full // page) * page
    swa = -(-swa // page) * page
    return replace(config, full_tokens=full, swa_tokens=swa, mamba_states=states)


def _freetoken_swa_floor(config: EngineConfig) -> int:
    """FreeToken's SWA pool floor for one running request (``_swa_per_req_swa_floor``): the window the
    prefill commit locks (W + 16, page-rounded) plus the request's own decode tail until its first
    out-of-window free (W + interval + 2 pages). Below it FreeToken's decode exhausts the pool and raises;
    its own sizing never goes there, so pressure scenarios stay above it and still evict."""
    page = config.page_size
    return -(-(config.window + 16) // page) * page + config.window + config.swa_eviction_interval + 2 * page


def _lengths(config: EngineConfig, requests: list[dict]) -> list[int]:
    """Prompt plus output tokens of every request."""
    probe = Scenario("probe", "", 0, "", False, config, trace_lines(_chained(requests)))
    trace = probe.trace()
    return [trace.prompt_len(r.id) + r.output_len for r in trace]


def _with_fillers(rng: random.Random, config: EngineConfig, requests: list[dict]) -> list[dict]:
    """vLLM's smallest pool still holds one longest request, and a hit is taken out of the free queue before
    anything is allocated, so serving one request at a time rarely evicts what the next one reuses. Unrelated
    fillers (a quarter to all of the longest request) between requests make the LRU order decide."""
    longest = max(_lengths(config, requests))
    with_fillers = []
    for index, request in enumerate(requests):
        with_fillers.append(request)
        if index < len(requests) - 1 and rng.random() < 0.5:
            filler = f"{request['id']}-fill"
            with_fillers.append(
                {
                    "id": filler,
                    "prompt": [{"ref": filler, "len": rng.randint(longest // 4, longest)}],
                    "output_len": rng.randint(1, 64),
                }
            )
    return with_fillers


def _with_vllm_pool(
    rng: random.Random, config: EngineConfig, requests: list[dict], pressure: bool
) -> EngineConfig:
    """vLLM's knobs and its one shared pool: under pressure a few blocks above what vLLM's startup check
    demands for one request of max_model_len (so the pool evicts), else more blocks than the scenario ever
    allocates (so it never does)."""
    from dataclasses import replace

    page = config.page_size
    lengths = _lengths(config, requests)
    max_model_len = -(-max(lengths) // page) * page + page
    retention = rng.choice((0, 0, 0, None, page * rng.choice((2, 4, 8))))
    if not (config.has_swa or config.has_mamba):
        retention = 0
    checkpoints = config.has_mamba and page % 64 == 0 and rng.random() < 0.4
    config = replace(
        config, retention_interval=retention, prefill_checkpoints=checkpoints, max_model_len=max_model_len
    )
    num_groups = 1 + config.has_swa + config.has_mamba
    if pressure:
        num_blocks = vllm_min_blocks(config) + rng.randint(0, 3)
    else:
        num_blocks = max(
            vllm_min_blocks(config), 1 + 2 * num_groups * sum(-(-length // page) + 3 for length in lengths)
        )
    return replace(config, num_blocks=num_blocks)


def vllm_min_blocks(config: EngineConfig) -> int:
    """The fewest blocks vLLM 0.33.0 starts with (v1/core/kv_cache_planning.py:get_kv_cache_configs): the null
    block plus, per group, its max_memory_usage_bytes for one request of max_model_len, where a sliding
    window holds at most W-1 tokens plus the in-flight tokens of the two batches async scheduling overlaps
    (SlidingWindowSpec.max_admission_blocks_per_request) and align-mode Mamba two states plus the internal
    checkpoint (MambaSpec.max_memory_usage_bytes)."""
    page, max_len = config.page_size, config.max_model_len
    blocks = 1 + -(-max_len // page)
    if config.has_swa:
        blocks += -(-min(config.window - 1 + 2 * config.chunked_prefill_size, max_len) // page) + 1
    if config.has_mamba:
        blocks += 2 + config.prefill_checkpoints
    return blocks
