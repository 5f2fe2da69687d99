"""Seeded scenarios nobody tuned to: fan-out, multi-turn with outputs (whole, cut, reasoning dropped),
divergence near page / window / checkpoint / chunk boundaries, exact repeats, and mixes of them, over
random knobs each engine accepts; with ``pressure`` the pools are small enough that the engine evicts.

``generate(engine, seed, pressure)`` is a pure function of its arguments: the same triple gives the same
scenario on every machine.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from conformance.generate_long import is_long, long_requests
from conformance.generate_pools import SGLANG_MIN_STATES, with_fillers, with_pools, with_vllm_pool
from conformance.scenario import EngineConfig, Scenario, one_at_a_time, trace_lines

KINDS = ("fanout", "multiturn", "diverge", "repeat", "mixed")  # and "long" (generate_long.py)
_COMPONENTS = {
    "sglang": ("full+swa", "full+mamba", "full+swa+mamba"),
    "freetoken": ("full+swa", "full+mamba"),
    "vllm": ("full+swa", "full+mamba", "full+swa+mamba"),
}
# vLLM: 528 / 576 are what _align_hybrid_block_size derives for Qwen3.5-4B (Triton / FlashInfer GDN)
_PAGES = {"sglang": (16, 32, 64, 128), "freetoken": (1, 1, 4, 16, 64), "vllm": (16, 32, 64, 528, 576)}


def generate(engine: str, seed: int, pressure: bool = False) -> Scenario:
    if engine not in _COMPONENTS:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(_COMPONENTS)}")
    rng = random.Random(f"{engine}/{seed}/{pressure}")
    kind = rng.choice(KINDS)
    config = _config(rng, engine)
    if is_long(engine, seed, pressure):  # the rest of the draw as for every seed, the requests long
        kind = "long"
    requests = long_requests(rng, config, "p0") if kind == "long" else _requests(rng, kind, config)
    if engine == "vllm" and pressure:
        requests = with_fillers(rng, config, requests)
    config = with_pools(rng, config, requests, pressure, engine, edge=kind == "long")
    if engine == "vllm":
        config = with_vllm_pool(rng, with_geometry(seed, pressure, config), requests, pressure)
    if engine == "sglang" and config.has_mamba and config.mamba_states < SGLANG_MIN_STATES:
        # SGLang refuses to start below 5 states (3 + 2 ping-pong slots per running request)
        config = replace(config, mamba_states=SGLANG_MIN_STATES)
    if engine == "freetoken":  # its default scheduler overlaps; the plain loop is a setting
        config = replace(config, overlap=rng.random() < 0.7)
    return Scenario(
        f"{engine}-{seed}{'-pressure' if pressure else ''}-{kind}",
        engine,
        seed,
        kind,
        pressure,
        config,
        trace_lines(one_at_a_time(requests)),
    )


def with_geometry(seed: int, pressure: bool, config: EngineConfig) -> EngineConfig:
    """vLLM only: FULL and SWA layers storing different bytes a token (gemma-4: SWA twice FULL), so the groups
    get different block sizes (``unify_kv_cache_spec_page_size``). Drawn from a stream of its own, so the
    rest of a seed's scenario is what it always was. Not with Mamba (not modelled: ``blocks/startup.py``)."""
    rng = random.Random(f"vllm/{seed}/{pressure}/geometry")
    if not config.has_swa or config.has_mamba or rng.random() >= 0.3:
        return config
    full_heads, swa_heads = rng.choice(((1, 2), (1, 2), (2, 1), (1, 4)))
    return replace(config, full_kv_heads=full_heads, swa_kv_heads=swa_heads)


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
        request: dict[str, Any] = {
            "id": f"{tag}-t{turn}",
            "prompt": list(prompt),
            "output_len": _output_len(rng),
        }
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
