"""The one-at-a-time family's long prompts: a share of ``generate``'s seeds serve a prompt of 8k to 30k tokens
and its follow-ups (a sibling diverging near a rule's boundary, an exact repeat, the next turns with the
answer whole, cut or with its reasoning dropped) up to 32,768 tokens a request, in place of the drawn kind.
Which seeds are long is drawn from a stream of its own, so every other seed's scenario is what it was.
"""

from __future__ import annotations

import random
from typing import Any

from conformance.scenario import EngineConfig

LONG_SHARE = 0.12  # of the seeds: 12 to 28 of 200 per engine and pressure
# the stream's name: chosen so that the seeds tests pin by number (tests/sglang_budget_scenarios.py,
# tests/conformance/test_*_engine.py) keep their scenarios, and CI's 30 seeds hold one or two long ones per
# engine and pressure
_STREAM = "long1503"
MAX_REQUEST_LEN = 32_768  # prompt and output of one request, at most
_FOLLOW_UPS = ("turn", "turn", "sibling", "repeat")


def is_long(engine: str, seed: int, pressure: bool) -> bool:
    """Whether ``generate(engine, seed, pressure)`` serves long prompts."""
    return random.Random(f"{engine}/{seed}/{pressure}/{_STREAM}").random() < LONG_SHARE


def long_requests(rng: random.Random, config: EngineConfig, tag: str) -> list[dict]:
    """The long prompt, then two to four follow-ups, served one at a time in this order."""
    first_len, first_output = rng.randint(8_000, 30_000), _output(rng)
    long_prompt = [{"ref": f"{tag}-l", "len": first_len}]
    first: dict[str, Any] = {"id": f"{tag}-L0", "prompt": long_prompt, "output_len": first_output}
    requests, last = [first], first
    output_lens = {f"{tag}-L0": first_output}
    for index in range(1, rng.randint(3, 5)):
        name = f"{tag}-L{index}"
        follow_up = rng.choice(_FOLLOW_UPS)
        if follow_up == "turn":
            request = _next_turn(rng, last, name, output_lens)
            last = request
        elif follow_up == "sibling":
            request = _sibling(rng, config, first_len, f"{tag}-l", name)
        else:
            request = {"id": name, "prompt": list(long_prompt), "output_len": _output(rng)}
        requests.append(request)
        output_lens[name] = request["output_len"]
    return requests


def _output(rng: random.Random) -> int:
    return rng.choice((1, 2, rng.randint(3, 64), rng.randint(64, 400)))


def _prompt_len(prompt: list[dict], output_lens: dict[str, int]) -> int:
    total = 0
    for part in prompt:
        if "ref" in part:
            total += part["len"]
        else:
            out = output_lens[part["output_of"]]
            total += part.get("len", out - part.get("skip", 0))
    return total


def _next_turn(rng: random.Random, last: dict, name: str, output_lens: dict[str, int]) -> dict:
    """The last turn's prompt, its answer (whole, cut, or with the reasoning dropped) and a new message; one
    in three fills the request to exactly ``MAX_REQUEST_LEN``."""
    out = last["output_len"]
    answer: dict[str, Any] = {"output_of": last["id"]}
    way = rng.choice(("whole", "whole", "cut", "skip"))
    if way == "cut" and out >= 3:
        answer["len"] = rng.randint(1, out - 1)
    elif way == "skip" and out >= 3:
        answer["skip"] = rng.randint(1, out - 1)
    prompt = [*last["prompt"], answer]
    output_len = _output(rng)
    room = MAX_REQUEST_LEN - _prompt_len(prompt, output_lens) - output_len
    if room < 1:  # the conversation is full: this turn repeats the last one's prompt
        return {"id": name, "prompt": list(last["prompt"]), "output_len": min(output_len, out)}
    message = room if rng.random() < 1 / 3 else rng.randint(1, min(room, 2000))
    return {"id": name, "prompt": [*prompt, {"ref": f"{name}-u", "len": message}], "output_len": output_len}


def _sibling(rng: random.Random, config: EngineConfig, first_len: int, ref: str, name: str) -> dict:
    """Shares the long prompt's first D tokens, D within a few tokens of a multiple of a rule's unit (page,
    chunk, window, track interval, Mamba chunk) or anywhere past its half."""
    units = [config.page_size, config.chunked_prefill_size, config.window or config.page_size]
    units += [config.track_interval, config.mamba_chunk]
    unit = max(1, rng.choice(units))
    base = rng.choice(
        (unit * rng.randint(1, max(1, first_len // unit)), rng.randint(first_len // 2, first_len))
    )
    shared = max(1, min(first_len, base + rng.choice((-2, -1, 0, 0, 1, 2))))
    own = rng.randint(1, 500)
    return {
        "id": name,
        "prompt": [{"ref": ref, "len": shared}, {"ref": f"{name}-b", "len": own}],
        "output_len": _output(rng),
    }
