"""Seeded concurrent scenarios: many requests in flight at once, arriving at whole steps of a step clock.

Shapes: ``burst`` (fan-out siblings of one system prompt arriving in the same step, sometimes a second wave),
``followups`` (conversations whose next turn, carrying the last output, arrives while others decode),
``long`` (prompts chunked across many steps beside short ones), and ``mixed`` (parts of each, mixed lengths).
2 to 40 requests, a few sharing patterns at once; with ``pressure`` the pools are small enough that requests
wait, evict, or are retracted / preempted. The engine's knobs come from the one-at-a-time generator
(``generate._config``), with windows up to 4096.

``generate_concurrent(engine, seed, pressure)`` is a pure function of its arguments.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from conformance import generate as one_at_a_time_generator
from conformance.generate_knobs import (
    knob_stream,
    long_prefill_threshold,
    with_mamba_chunk,
    with_max_running,
    with_sglang_loop,
)
from conformance.generate_pools import SGLANG_MIN_STATES, with_freetoken_floors, with_pools, with_vllm_pool
from conformance.scenario import Scenario, trace_lines

SHAPES = ("burst", "followups", "long", "mixed")
_WINDOWS = (24, 64, 100, 128, 200, 256, 512, 1024, 2048, 4096)


def generate_concurrent(engine: str, seed: int, pressure: bool = False) -> Scenario:
    if engine not in one_at_a_time_generator._COMPONENTS:
        raise ValueError(
            f"unknown engine {engine!r}; choose from {', '.join(one_at_a_time_generator._COMPONENTS)}"
        )
    rng = random.Random(f"concurrent/{engine}/{seed}/{pressure}")
    shape = rng.choice(SHAPES)
    config = one_at_a_time_generator._config(rng, engine)
    if config.has_swa and rng.random() < 0.3:
        config = replace(config, window=rng.choice(_WINDOWS))
    knobs = knob_stream("concurrent", engine, seed, pressure)
    config = with_sglang_loop(knobs, engine, with_mamba_chunk(knobs, engine, config))
    config = with_max_running(knobs, engine, config)
    requests = _requests(rng, shape, config.chunked_prefill_size)
    pool_requests = [{key: value for key, value in r.items() if key != "arrival"} for r in requests]
    config = with_pools(rng, config, pool_requests, pressure, engine)
    if engine == "vllm":
        # per-group block sizes from a stream of their own: the other draws stay as they were
        geometry = one_at_a_time_generator.with_geometry(seed, pressure, config)
        config = with_vllm_pool(rng, geometry, pool_requests, pressure)
    if engine == "sglang" and config.has_mamba and config.mamba_states < SGLANG_MIN_STATES:
        config = replace(config, mamba_states=SGLANG_MIN_STATES)
    if engine == "freetoken":
        config = with_freetoken_floors(replace(config, overlap=rng.random() < 0.7))
    if engine == "vllm":  # async scheduling off in 30%, a long-prefill cap in 20%
        threshold = long_prefill_threshold(rng, config)
        config = replace(config, overlap=rng.random() < 0.7, long_prefill_threshold=threshold)
    name = f"{engine}-concurrent-{seed}{'-pressure' if pressure else ''}-{shape}"
    return Scenario(name, engine, seed, f"concurrent-{shape}", pressure, config, trace_lines(requests))


def _requests(rng: random.Random, shape: str, chunk: int) -> list[dict]:
    if shape == "mixed":
        requests: list[dict] = []
        for part in range(rng.randint(2, 3)):
            requests += _shape(rng, rng.choice(SHAPES[:-1]), chunk, f"p{part}", rng.randint(0, 40))
    else:
        requests = _shape(rng, shape, chunk, "p0", 0)
    requests.sort(key=lambda r: r["arrival"])  # trace order is arrival order (ties keep the shape's order)
    return requests[:40]


def _shape(rng: random.Random, shape: str, chunk: int, tag: str, start: int) -> list[dict]:
    make = {"burst": _burst, "followups": _followups, "long": _long}[shape]
    return make(rng, chunk, tag, start)


def _output_len(rng: random.Random) -> int:
    return rng.choice((1, 2, rng.randint(3, 40), rng.randint(3, 40), rng.randint(40, 300)))


def _burst(rng: random.Random, chunk: int, tag: str, start: int) -> list[dict]:
    system = rng.randint(16, 3000)
    requests, at = [], start
    for wave in range(rng.choice((1, 1, 2))):
        for i in range(rng.randint(2, 12)):
            own = {"ref": f"{tag}-w{wave}q{i}", "len": rng.randint(1, 400)}
            requests.append(
                {
                    "id": f"{tag}-w{wave}f{i}",
                    "arrival": float(at),
                    "prompt": [{"ref": f"{tag}-sys", "len": system}, own],
                    "output_len": _output_len(rng),
                }
            )
        at += rng.randint(1, 60)
    return requests


def _followups(rng: random.Random, chunk: int, tag: str, start: int) -> list[dict]:
    requests: list[dict] = []
    for session in range(rng.randint(1, 4)):
        at = start + rng.randint(0, 20)
        prompt = [{"ref": f"{tag}-s{session}u0", "len": rng.randint(16, 2000)}]
        for turn in range(rng.randint(2, 4)):
            request: dict[str, Any] = {
                "id": f"{tag}-s{session}t{turn}",
                "arrival": float(at),
                "prompt": list(prompt),
                "output_len": _output_len(rng),
            }
            requests.append(request)
            output = {"output_of": request["id"]}
            if request["output_len"] > 2 and rng.random() < 0.3:  # the client cut the answer
                output["len"] = rng.randint(1, request["output_len"] - 1)
            prompt = prompt + [output, {"ref": f"{tag}-s{session}u{turn + 1}", "len": rng.randint(1, 200)}]
            # the next turn arrives while this one (and others) may still decode
            at += rng.randint(1, request["output_len"] + 30)
    return requests


def _long(rng: random.Random, chunk: int, tag: str, start: int) -> list[dict]:
    requests = []
    for i in range(rng.randint(2, 6)):
        is_long = i == 0 or rng.random() < 0.4
        length = rng.randint(chunk + 1, 3 * chunk + 1) if is_long else rng.randint(1, 300)
        length = min(length, 32768 if rng.random() < 0.05 else 8000)
        requests.append(
            {
                "id": f"{tag}-l{i}",
                "arrival": float(start + rng.randint(0, 12)),
                "prompt": [{"ref": f"{tag}-l{i}", "len": length}],
                "output_len": _output_len(rng),
            }
        )
    return requests
