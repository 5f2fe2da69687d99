"""The boundary family's targeted scenarios: situations a random draw almost never reaches, built on purpose,
each to make one engine decision turn on a single token or an exact tie (``generate_boundary`` serves them at
seeds ``TARGETED_FROM`` and up, per engine, so its earlier seeds stay as they were). Shapes:

``dup-insert`` (SGLang) two identical prompts in one batch with another between them, so the second insert
    of the same path (and of the same Mamba state) refreshes what the first inserted; then one eviction that
    must choose between that path and the other (FULL under pressure, MAMBA without), and a request reusing
    each, so the choice shows as a hit;
``decode-edge`` (SGLang) a request arriving while another decodes, the FULL pool exactly at its admission
    edge once the running request's remaining decode is reserved (one token more and it is admitted);
``mixed-cut`` (SGLang, ``--enable-mixed-chunk``) the running decode's token taken off the pass's chunk
    budget, so a prompt between the last page and the budget is cut at a page, not at the budget;
``tied-states`` (FreeToken GDN) two snapshots on one path with one walk's timestamp, the oldest in a full
    state pool, so the heap's tie-break (and the scan order it is built in) decides which one a new request
    evicts, and a later prompt reuses the shallower one;
``swa-admit`` (FreeToken SWA) three prompts longer than the window in one step, the SWA pool where one of
    them is admitted or not on the last token of its need (``min(extend, W) + 1``);
``swa-cap`` (vLLM) a prompt longer than the SWA group's admission cap (``W - 1`` plus the batch budget, one
    block of slack) arriving while another decodes, the pool one block short of its need.

Seeds from ``LONG_FROM`` on are drawn by ``generate_boundary`` like its own, with ``long_prompts``' requests
(16k to 32k tokens) in place of a drawn shape's.

``generate_targeted(engine, seed, pressure)`` is a pure function of its arguments; the pressure flag picks a
variant of the shape (both hold pools at an edge).
"""

from __future__ import annotations

import random
from dataclasses import replace

from conformance.scenario import EngineConfig, Scenario, trace_lines

TARGETED_FROM = 1000  # the first boundary seed that is a targeted scenario: far past every drawn one
SHAPES = {
    "sglang": ("dup-insert", "decode-edge", "mixed-cut"),
    "freetoken": ("tied-states", "swa-admit"),
    "vllm": ("swa-cap",),
}
_GAP = 128  # swa_eviction_interval: unused by these FULL + MAMBA configurations, kept at its default


LONG_FROM, NUM_LONG = 2000, 8  # boundary seeds drawn as the boundary family draws, with 16k-32k-token prompts


def long_seeds(engine: str) -> range:
    """The boundary seeds of ``engine`` whose requests are ``long_prompts``."""
    return range(LONG_FROM, LONG_FROM + NUM_LONG)


def long_prompts(rng: random.Random, edges: list[int], past_clip: bool) -> list[dict]:
    """A prompt of 16k to 30k tokens; a sibling sharing half of it or more arriving while it prefills; its
    follow-up (the prompt, its answer, a new turn) at most 32,768 tokens long, arriving while it decodes or
    after. The configuration and pools are drawn as for every boundary seed."""
    first, output = rng.randint(16_000, 30_000), rng.randint(2, 64)
    shared = rng.choice([rng.randint(first // 2, first), *[e for e in edges if first // 2 <= e <= first][:2]])
    tail = rng.randint(1, 32_768 - first - output)
    return [
        _request("L0", 0, [("l", first)], output),
        _request("L1", rng.randint(1, 4), [("l", shared), ("l1", rng.randint(1, 500))], rng.randint(2, 64)),
        _request(
            "L2", rng.randint(5, 400), [("l", first), {"output_of": "L0"}, ("l2", tail)], rng.randint(2, 32)
        ),
    ]


def targeted_seeds(engine: str) -> range:
    """The boundary seeds of ``engine`` that are targeted scenarios."""
    return range(TARGETED_FROM, TARGETED_FROM + len(SHAPES[engine]))


def generate_targeted(engine: str, seed: int, pressure: bool) -> Scenario:
    if seed not in targeted_seeds(engine):
        raise ValueError(f"{engine} has no targeted boundary scenario at seed {seed}")
    shape = SHAPES[engine][seed - TARGETED_FROM]
    rng = random.Random(f"targeted/{engine}/{shape}/{pressure}")
    make = {
        "dup-insert": _dup_insert,
        "decode-edge": _decode_edge,
        "mixed-cut": _mixed_cut,
        "tied-states": _tied_states,
        "swa-admit": _swa_admit,
        "swa-cap": _swa_cap,
    }[shape]
    config, requests = make(rng, pressure)
    name = f"{engine}-boundary-{seed}{'-pressure' if pressure else ''}-{shape}"
    return Scenario(name, engine, seed, f"boundary-{shape}", pressure, config, trace_lines(requests))


def _request(name: str, at: int, parts: list, output_len: int) -> dict:
    prompt = [part if isinstance(part, dict) else {"ref": part[0], "len": part[1]} for part in parts]
    return {"id": name, "arrival": float(at), "prompt": prompt, "output_len": output_len}


def _config(page: int, full_tokens: int, mamba_states: int, **knobs) -> EngineConfig:
    return EngineConfig(
        "full+mamba", page, 0, 256, 64, knobs.pop("chunk", 8192), _GAP, full_tokens, 0, mamba_states, **knobs
    )


def _dup_insert(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """X, Y, X again in one batch, at page 1 so every pool below is in whole tokens. Pressure: a request that
    evicts one prompt's leaf, not both; without: twelve one-state fillers until a filler must evict one of the
    two prompt states."""
    prompt_len, output_len = 256, 16  # on the 64-token Mamba grid: each prompt leaves one state at its end
    requests = [
        _request(name, 0, [(ref, prompt_len)], output_len)
        for name, ref in (("X", "px"), ("Y", "py"), ("X2", "px"))
    ]
    at = 50
    if pressure:
        full = 3 * (prompt_len + output_len) + 200  # room for the three at once
        free_after = full - 2 * prompt_len  # the two prompts stay cached, the duplicate's pages are freed
        requests.append(_request("F", at, [("pf", free_after + prompt_len // 2)], 2))
        at, states = at + 50, 40
    else:
        full, states = 4000, 15  # fifteen: the three run together; twelve fillers fill the rest
        for k in range(12):
            requests.append(_request(f"G{k}", at, [(f"g{k}", 64)], 1))
            at += 30
    for name, ref in (("PX", "px"), ("PY", "py")):  # each reuses one prompt's state: a hit if it survived
        requests.append(_request(name, at, [(ref, prompt_len), (f"q{ref}", rng.randint(1, 8))], 2))
        at += 50
    return _config(1, full, states, overlap=False), requests


def _decode_edge(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """B arrives at step 3 while A decodes; at page 1 B's ``total_tokens`` (extend + decode + a page) equals
    what remains once A's remaining decode is reserved exactly when the pool is the four lengths' sum."""
    first_prompt, first_output = rng.randint(40, 300), rng.randint(10, 60)
    second_prompt, second_output = rng.randint(20, 300), rng.randint(1, 40)
    requests = [
        _request("A", 0, [("pa", first_prompt)], first_output),
        _request("B", 3, [("pb", second_prompt)], second_output),
    ]
    full = first_prompt + first_output + second_prompt + second_output
    return _config(1, full, 20, overlap=False), requests


def _mixed_cut(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """A decodes while B's prompt (page-ceiled past the chunk budget less A's mixed-in decode token) is cut."""
    page = rng.choice((16, 32))
    chunk = page * rng.choice((4, 8))
    requests = [
        _request("A", 0, [("pa", rng.randint(30, 200))], rng.randint(10, 40)),
        _request("B", 3, [("pb", chunk - rng.randint(1, page - 1))], rng.randint(1, 8)),
    ]
    config = _config(page, 4096, 20, chunk=chunk, overlap=False, mixed_chunk=True)
    return config, requests


def _tied_states(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """FreeToken GDN at page 16, 16 states (its floor for four running requests): A leaves snapshots at 128
    and 160; B, matching both, re-stamps them with one walk's stamp. Early requests re-touched after B put
    other branches before A's in the scan; fillers of one state each fill the pool until the last filler
    must evict one of the tied pair; C then reuses A's first 128 tokens."""
    early = 2 if pressure else 6
    requests, at = [], 0
    for k in range(early):
        requests.append(_request(f"Z{k}", at, [(f"z{k}", 50)], 15))  # 50 + 15 - 1 = 64: one state
        at += 100
    requests.append(_request("A", at, [("x", 150)], 11))  # snapshot at 128, final state at 160
    requests.append(_request("B", at + 100, [("x", 150), {"output_of": "A"}, ("b", 20)], 12))
    at += 200
    for k in range(early):
        requests.append(_request(f"Y{k}", at, [(f"z{k}", 50)], 15))
        at += 100
    for k in range(16 - 5 - early):
        requests.append(_request(f"F{k}", at, [(f"f{k}", 50)], 15))
        at += 100
    requests.append(_request("G", at, [("g", 50)], 10))  # evicts one state, leaves none (59: off the page)
    requests.append(_request("C", at + 100, [("x", 128 + rng.randint(1, 15))], 3))
    return _config(16, 100_000, 16, overlap=False), requests


def _swa_admit(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """Prompts of 120 tokens (W = 64, page 1) with two-token outputs: short decodes keep FreeToken within its
    pool below its four-request floor. The two pools are where, scanning the SWA pool token by token, the
    admission check ``available < need`` turns on its last token (found on the simulator's rule, each
    verified on FreeToken: tests/conformance/test_suite_agrees.py)."""
    requests = [_request(f"s{i}", 0, [(f"p{i}", 120)], 2) for i in range(3)]
    config = EngineConfig("full+swa", 1, 64, 256, 64, 8192, _GAP, 20_000, 224 if pressure else 304, 0)
    return replace(config, overlap=False), requests


def _swa_cap(rng: random.Random, pressure: bool) -> tuple[EngineConfig, list[dict]]:
    """Blocks of 16, W = 32, a batch budget of 64: the SWA group's admission cap is ceil((32 - 1 + 64) / 16)
    + 1 = 7 blocks. A (300 tokens) holds 19 FULL and 3 SWA blocks while it decodes; B (300 tokens, arriving
    at step 8) needs 19 FULL and 7 SWA: 26. With the null block, 47 blocks leave B 25: it waits for A to
    finish (48: B starts at step 8, and the cap decides a later step, 24)."""
    requests = [_request("A", 0, [("pa", 300)], 30), _request("B", 8, [("pb", 300)], 5)]
    config = EngineConfig("full+swa", 16, 32, 256, 64, 64, _GAP, 0, 0, 0, overlap=False, max_model_len=512)
    return replace(config, num_blocks=48 if pressure else 47), requests
