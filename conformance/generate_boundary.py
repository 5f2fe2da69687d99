"""Seeded scenarios where the engine's choices matter: lengths exactly at every boundary the rules name, +-1
(page, block, window W and W - 1, window + gap, the Mamba checkpoint grid and track interval, the prefill
chunk), odd windows (W - 1 a multiple of the page), pools at the exact edge of one request's need, identical
prompts arriving together (exact recency ties, the same continuation inserted twice), and up to 40 requests
over several shared prefixes, so eviction picks among candidates later requests need. Requests arrive on the
step clock in waves (``concurrent``'s form); shapes:

``edges``  a few prefixes at boundary lengths, each reused by requests diverging at boundaries, some alone;
``ties``   groups of identical prompts (and fan-out siblings) arriving in the same step, reused later;
``evict``  many requests over 2-5 shared prefixes in waves, pools near the edge, so eviction must choose;
``retract`` several requests decoding long outputs at once in a small pool (SGLang retracts, vLLM preempts).

A family of its own beside ``generate`` and ``generate_concurrent`` (whose seeds stay as they were). Seeds
from ``generate_targeted.TARGETED_FROM`` on are built on purpose, one shape each (``generate_targeted``).
``generate_boundary(engine, seed, pressure)`` is a pure function of its arguments.
"""

from __future__ import annotations

import random
from dataclasses import replace

from conformance import generate_knobs as drawn
from conformance.generate import _COMPONENTS
from conformance.generate_pools import SGLANG_MIN_STATES, with_freetoken_floors, with_vllm_pool
from conformance.generate_targeted import generate_targeted, long_prompts, long_seeds, targeted_seeds
from conformance.scenario import EngineConfig, Scenario, trace_lines
from sim.align import ceil_to

SHAPES = ("edges", "ties", "evict", "retract")
_PAGES = {
    "sglang": (1, 16, 16, 32, 64, 128, 256),
    "freetoken": (1, 1, 4, 16, 64),
    "vllm": (16, 16, 32, 64, 128),
}
_GAP = 128  # SGLang's / FreeToken's swa_eviction_interval default: the "window + gap" boundary
_MAX_REQUESTS = 40
CLIP_MAX_NEW_TOKENS = (
    4096  # SGLang's SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: admission budgets decode up to this
)
CI_SEEDS = 20  # seeds per engine x pressure in CI (tests/conformance/test_suite_agrees.py)
# Open differences the family found and the simulator does not yet explain, each with its first differing step:
# reported, not failed (tests/conformance/test_suite_agrees.py); the mutation harness does not compare them
KNOWN: dict[tuple[str, int, bool], str] = {}


def generate_boundary(engine: str, seed: int, pressure: bool = False) -> Scenario:
    if engine not in _COMPONENTS:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(_COMPONENTS)}")
    if seed in targeted_seeds(engine):
        return generate_targeted(engine, seed, pressure)
    rng = random.Random(f"boundary/{engine}/{seed}/{pressure}")
    shape = "long" if seed in long_seeds(engine) else rng.choice(SHAPES)
    knobs = drawn.knob_stream("boundary", engine, seed, pressure)
    config = _config(rng, engine, drawn.mamba_chunk(knobs, engine))
    config = drawn.with_sglang_loop(knobs, engine, drawn.with_swa_interval(knobs, engine, config))
    config = drawn.with_max_running(knobs, engine, config)
    edges = boundaries(config)
    make = {"edges": _edges, "ties": _ties, "evict": _evict, "retract": _retract, "long": long_prompts}[shape]
    requests = make(rng, edges, past_clip=engine != "freetoken")  # FreeToken retracts nothing
    requests = sorted(requests, key=lambda r: r["arrival"])[:_MAX_REQUESTS]
    pool_requests = [{k: v for k, v in r.items() if k != "arrival"} for r in requests]
    config = _with_edge_pools(rng, config, requests, pressure or shape == "retract")
    if engine == "vllm":
        config = with_vllm_pool(rng, config, pool_requests, pressure or shape == "retract")
        config = replace(config, overlap=rng.random() < 0.7)
        config = replace(config, long_prefill_threshold=drawn.long_prefill_threshold(knobs, config))
    if engine == "sglang" and config.has_mamba:
        config = replace(config, mamba_states=max(config.mamba_states, SGLANG_MIN_STATES))
    if engine == "freetoken":
        config = with_freetoken_floors(replace(config, overlap=rng.random() < 0.7))
    name = f"{engine}-boundary-{seed}{'-pressure' if pressure else ''}-{shape}"
    return Scenario(name, engine, seed, f"boundary-{shape}", pressure, config, trace_lines(requests))


def _config(rng: random.Random, engine: str, chunk: int) -> EngineConfig:
    """``chunk``: the model's Mamba chunk (drawn apart: ``generate_knobs``); the checkpoint grid follows it."""
    components = rng.choice(_COMPONENTS[engine])
    has_swa, has_mamba = "swa" in components, "mamba" in components
    page = 1 if engine == "freetoken" and has_swa else rng.choice(_PAGES[engine])
    grid = max(chunk, page)
    window = 0
    if has_swa:  # W at a multiple of the page or block, one more (W - 1 on the grid: an odd window), one less
        unit = max(page, 16) if engine == "vllm" else max(page, rng.choice((1, 16, 32, 64)))
        multiple = rng.choice((1, 1, 2, 3, 4, 8)) if rng.random() < 0.85 else rng.choice((16, 32, 64))
        window = max(2, min(4096, unit * multiple + rng.choice((1, 1, 0, -1))))
    track = grid * rng.choice((1, 1, 2)) if has_mamba else 256
    prefill = grid * rng.choice((1, 1, 2, 4)) if rng.random() < 0.7 else 8192  # a chunk exactly one grid long
    return EngineConfig(components, page, window, track, chunk, max(prefill, page), _GAP, 0, 0, 0)


def boundaries(config: EngineConfig) -> list[int]:
    """Every length a rule of this configuration names, -1, +0 and +1, at one to three multiples."""
    units = {config.page_size, config.chunked_prefill_size}
    if config.has_swa:
        units |= {config.window, config.window - 1, config.window + config.swa_eviction_interval}
    if config.has_mamba:
        units |= {max(config.mamba_chunk, config.page_size), config.track_interval}
    lengths = set()
    for unit in units:
        for multiple in (1, 2, 3):
            lengths |= {unit * multiple - 1, unit * multiple, unit * multiple + 1}
    return sorted(length for length in lengths if 1 <= length <= 6000)


def _output_len(rng: random.Random, long: bool = False) -> int:
    if long:
        return rng.randint(60, 400)
    return rng.choice((1, 2, rng.randint(3, 24), rng.randint(3, 24), rng.randint(24, 120)))


def _request(name: str, at: int, parts: list[tuple[str, int]], output_len: int) -> dict:
    prompt = [{"ref": ref, "len": length} for ref, length in parts if length > 0]
    return {"id": name, "arrival": float(at), "prompt": prompt, "output_len": output_len}


def _edges(rng: random.Random, edges: list[int], past_clip: bool = False) -> list[dict]:
    """Prefixes at boundary lengths, each shared by later requests that diverge exactly at a boundary: some
    served alone (far apart), some together."""
    requests, at = [], 0
    for p in range(rng.randint(2, 4)):
        prefix = rng.choice(edges)
        requests.append(_request(f"e{p}", at, [(f"x{p}", prefix)], _output_len(rng)))
        for i in range(rng.randint(1, 4)):
            at += rng.choice((0, 0, 1, 2, 40, 400))
            shared = min(prefix, rng.choice(edges))
            own = rng.choice((0, 1, rng.choice(edges)))
            requests.append(
                _request(f"e{p}d{i}", at, [(f"x{p}", shared), (f"e{p}d{i}", own)], _output_len(rng))
            )
        at += rng.choice((1, 40, 400))
    return requests


def _ties(rng: random.Random, edges: list[int], past_clip: bool = False) -> list[dict]:
    """Identical prompts and fan-out siblings in one step (the same stamps, the same continuation inserted by
    two requests), then requests that reuse part of them after eviction."""
    requests, at = [], 0
    for g in range(rng.randint(2, 4)):
        prefix = rng.choice(edges)
        for i in range(rng.randint(2, 4)):  # identical prompts: same arrival, or one step apart
            own = 0 if i % 2 == 0 or rng.random() < 0.5 else rng.choice(edges)
            requests.append(
                _request(
                    f"t{g}s{i}",
                    at + rng.choice((0, 0, 1)),
                    [(f"g{g}", prefix), (f"t{g}", own)],
                    _output_len(rng),
                )
            )
        at += rng.choice((2, 30, 200))
    for r in range(rng.randint(2, 6)):  # later reuse of one group's prompt, cut at a boundary
        g = rng.randrange(len({req["prompt"][0]["ref"] for req in requests}))
        prefix = next(req["prompt"][0]["len"] for req in requests if req["prompt"][0]["ref"] == f"g{g}")
        requests.append(
            _request(
                f"t-r{r}",
                at,
                [(f"g{g}", min(prefix, rng.choice(edges))), (f"r{r}", rng.randint(1, 40))],
                _output_len(rng),
            )
        )
        at += rng.choice((0, 1, 60))
    return requests


def _evict(rng: random.Random, edges: list[int], past_clip: bool = False) -> list[dict]:
    """Up to 40 requests over 2-5 shared prefixes, arriving in waves."""
    prefixes = [rng.choice(edges) for _ in range(rng.randint(2, 5))]
    requests, at = [], 0
    for wave in range(rng.randint(2, 6)):
        for i in range(rng.randint(2, 8)):
            p = rng.randrange(len(prefixes))
            own = rng.choice((rng.randint(1, 64), rng.choice(edges)))
            requests.append(
                _request(
                    f"w{wave}q{i}",
                    at + rng.choice((0, 0, 1)),
                    [(f"s{p}", prefixes[p]), (f"w{wave}q{i}", own)],
                    _output_len(rng),
                )
            )
        at += rng.choice((1, 20, 100, 300))
    return requests


def _retract(rng: random.Random, edges: list[int], past_clip: bool = False) -> list[dict]:
    """Several requests decoding long outputs at once (in the small pools every ``retract`` scenario gets);
    ``past_clip``: in half of them two or three outputs longer than SGLang's admission budgets a decode."""
    system = rng.choice(edges)
    requests = [
        _request(
            f"r{i}",
            rng.choice((0, 0, 1, 2)),
            [("sys", system), (f"r{i}", rng.randint(1, 200))],
            _output_len(rng, long=True),
        )
        for i in range(rng.randint(3, 8))
    ]
    if past_clip and rng.random() < 0.5:  # SGLang admits two on 4096 each, then retracts one of the tied pair
        requests = [
            _request(
                f"r{i}",
                0,
                [("sys", rng.randint(1, 64)), (f"r{i}", rng.randint(1, 64))],
                rng.randint(5300, 5500),
            )
            for i in range(rng.randint(2, 3))
        ]
    return requests


def _with_edge_pools(
    rng: random.Random, config: EngineConfig, requests: list[dict], small: bool
) -> EngineConfig:
    """Without pressure: room for everything. With it: the FULL (and SWA) pool at the edge of the largest
    request's need (its prompt and output, page-rounded), within a page, so admission decides on exact
    counts; Mamba a few states over one request's."""
    from conformance.generate_pools import _lengths

    lengths = [length for length in _lengths(config, [_chained(r) for r in requests])]
    page = config.page_size
    if not small:
        total = ceil_to(sum(lengths), page) + page * len(lengths)
        states = 4 * len(lengths) + 64 if config.has_mamba else 0
        return replace(
            config, full_tokens=total * 2, swa_tokens=total * 2 if config.has_swa else 0, mamba_states=states
        )
    need = ceil_to(max(lengths), page)
    full = need + page * rng.choice((0, 0, 1, 1, 2, rng.randint(3, 12)))
    swa = 0
    if config.has_swa:
        swa = ceil_to(config.window + config.chunked_prefill_size, page) + page * rng.choice((0, 1, 2, 4))
    states = rng.randint(4, 8) if config.has_mamba else 0
    if max(r["output_len"] for r in requests) > CLIP_MAX_NEW_TOKENS:  # two admitted on their clipped decode
        prompts = sorted(length - r["output_len"] for length, r in zip(lengths, requests, strict=True))[-2:]
        full = sum(ceil_to(p, page) + CLIP_MAX_NEW_TOKENS + 3 * page for p in prompts) + page * (states % 3)
        states = 12 if config.has_mamba else 0  # three slots a running request: room for three at once
    return replace(config, full_tokens=full, swa_tokens=swa, mamba_states=states)


def _chained(request: dict) -> dict:
    return {k: v for k, v in request.items() if k != "arrival"}
