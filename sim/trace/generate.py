"""Trace generators: SGLang's generated-shared-prefix fan-out, multi-turn chat, and the seed experiments.

Every generator is a pure function of its arguments: randomness comes only from ``random.Random(seed)``,
so the same arguments give byte-identical traces. Bad parameters raise ValueError naming the parameter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Literal

from sim.trace.checks import shown
from sim.trace.generate_checks import require, require_count, require_positive, require_time
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace


def _ref(ref: str, length: int) -> Segment:
    return Segment(ref=ref, len=length)


def _output(request_id: str, skip: int = 0) -> Segment:
    return Segment(output_of=request_id, skip=skip)


def _arrivals(kind: str, count: int, request_rate: float, rng: random.Random) -> list[float]:
    """Poisson arrivals at request_rate per second, the first at 0; all at 0 when the rate is inf."""
    require(
        kind, request_rate > 0, f"request_rate must be > 0 (inf = all at once), got {shown(request_rate)}"
    )
    if math.isinf(request_rate):
        return [0.0] * count
    times, now = [], 0.0
    for _ in range(count):
        times.append(round(now, 6))  # microseconds: short JSON, still monotonic
        now += rng.expovariate(request_rate)
    return times


def _follow_up(
    request_id: str, previous: Request, prompt: list[Segment], output_len: int, think_time: float = 0.0
) -> Request:
    return Request(
        id=request_id,
        session=previous.session,
        after=previous.id,
        think_time=think_time,
        prompt=prompt,
        output_len=output_len,
    )


def fanout(
    num_groups: int = 64,
    prompts_per_group: int = 16,
    system_len: int = 2048,
    question_len: int = 128,
    output_len: int = 256,
    request_rate: float = math.inf,
    seed: int = 0,
) -> Trace:
    """Groups of prompts that share a per-group system prompt, each with its own question."""
    require_positive(
        "fanout",
        num_groups=num_groups,
        prompts_per_group=prompts_per_group,
        system_len=system_len,
        question_len=question_len,
        output_len=output_len,
    )
    require_count("fanout", num_groups * prompts_per_group, "num_groups x prompts_per_group")
    arrivals = _arrivals("fanout", num_groups * prompts_per_group, request_rate, random.Random(seed))
    requests: list[Request] = []
    for group in range(num_groups):
        system = _ref(f"sys-g{group}", system_len)  # one shared record: a million requests at memory scale
        for prompt in range(prompts_per_group):
            request_id = f"g{group}-p{prompt}"
            requests.append(
                Request(
                    id=request_id,
                    arrival=arrivals[len(requests)],
                    prompt=[system, _ref(f"q-{request_id}", question_len)],
                    output_len=output_len,
                )
            )
    return Trace(requests, path="<fanout>")


def multiturn(
    num_sessions: int = 16,
    num_turns: int = 4,
    system_len: int = 1024,
    user_len: int = 128,
    output_len: int = 256,
    think_time: float = 1.0,
    drop_reasoning: int = 0,
    request_rate: float = math.inf,
    shared_system: bool = True,
    seed: int = 0,
) -> Trace:
    """Chat sessions: turn k+1 is sent think_time after turn k finishes, with prompt = turn k's prompt +
    its output (less the first drop_reasoning tokens, which the client drops) + a new user message.
    Sessions start at Poisson arrivals; shared_system gives all sessions one system prompt."""
    require_positive(
        "multiturn",
        num_sessions=num_sessions,
        num_turns=num_turns,
        system_len=system_len,
        user_len=user_len,
        output_len=output_len,
    )
    require(
        "multiturn",
        0 <= drop_reasoning < output_len,
        f"drop_reasoning must be in [0, output_len={output_len}), got {drop_reasoning!r}",
    )
    require_count("multiturn", num_sessions * num_turns, "num_sessions x num_turns")
    require_time("multiturn", "think_time", think_time)
    arrivals = _arrivals("multiturn", num_sessions, request_rate, random.Random(seed))
    requests = []
    for session in range(num_sessions):
        system = _ref("sys" if shared_system else f"sys-s{session}", system_len)
        turn = Request(
            id=f"s{session}-t0",
            arrival=arrivals[session],
            session=f"s{session}",
            prompt=[system, _ref(f"u-s{session}-t0", user_len)],
            output_len=output_len,
        )
        requests.append(turn)
        for k in range(1, num_turns):
            prompt = turn.prompt + [_output(turn.id, drop_reasoning), _ref(f"u-s{session}-t{k}", user_len)]
            turn = _follow_up(f"s{session}-t{k}", turn, prompt, output_len, think_time)
            requests.append(turn)
    return Trace(requests, path="<multiturn>")


def s1(
    num_prompts: int = 32,
    prompt_len: int = 3000,
    output_len: int = 1024,
    followup_output_len: int = 1,
    prompt_len_jitter: int = 0,
    seed: int = 0,
) -> Trace:
    """Seed experiment S1 (docs/seed-experiments.md): num_prompts sent at 0; each one's turn 2 (sent when it finishes) is its prompt
    + its output + one new token. Prompt lengths vary uniformly by +-prompt_len_jitter."""
    require_positive(
        "s1",
        num_prompts=num_prompts,
        prompt_len=prompt_len,
        output_len=output_len,
        followup_output_len=followup_output_len,
    )
    require_count("s1", 2 * num_prompts, "2 x num_prompts")
    require(
        "s1",
        0 <= prompt_len_jitter < prompt_len,
        f"prompt_len_jitter must be in [0, prompt_len={prompt_len}), got {prompt_len_jitter!r}",
    )
    rng = random.Random(seed)
    firsts = [
        Request(
            id=f"p{i}-t1",
            arrival=0.0,
            session=f"p{i}",
            output_len=output_len,
            prompt=[_ref(f"p{i}", prompt_len + rng.randint(-prompt_len_jitter, prompt_len_jitter))],
        )
        for i in range(num_prompts)
    ]
    seconds = [
        _follow_up(
            f"p{i}-t2", first, first.prompt + [_output(first.id), _ref(f"p{i}-t2", 1)], followup_output_len
        )
        for i, first in enumerate(firsts)
    ]
    return Trace(firsts + seconds, path="<s1>")


def s2(distance: int, prompt_len: int = 1886, output_len: int = 16) -> Trace:
    """Seed experiment S2: prompt 2 (sent after prompt 1 finishes) equals prompt 1 up to position
    prompt_len - distance, then diverges; both have prompt_len tokens."""
    require_positive("s2", distance=distance, prompt_len=prompt_len, output_len=output_len)
    require("s2", distance <= prompt_len, f"distance must be <= prompt_len={prompt_len}, got {distance}")
    shared = [_ref("s2-shared", prompt_len - distance)] if distance < prompt_len else []
    first = Request(
        id="r1",
        arrival=0.0,
        session="s2",
        output_len=output_len,
        prompt=shared + [_ref("s2-tail-r1", distance)],
    )
    second = _follow_up("r2", first, shared + [_ref("s2-tail-r2", distance)], output_len)
    return Trace([first, second], path="<s2>")


def s3(
    system_len: int = 7700,
    user_len: int = 80,
    output_len: int = 16,
    mode: Literal["fanout", "append"] = "fanout",
) -> Trace:
    """Seed experiment S3: a long system prompt, then a second request (sent after the first finishes)
    with a different user message (fanout) or the first's history + output + a new message (append)."""
    require_positive("s3", system_len=system_len, user_len=user_len, output_len=output_len)
    require("s3", mode in ("fanout", "append"), f"mode must be 'fanout' or 'append', got {mode!r}")
    system = _ref("s3-sys", system_len)
    first = Request(
        id="r1",
        arrival=0.0,
        session="s3",
        output_len=output_len,
        prompt=[system, _ref("s3-user-r1", user_len)],
    )
    history = first.prompt + [_output(first.id)] if mode == "append" else [system]
    second = _follow_up("r2", first, history + [_ref("s3-user-r2", user_len)], output_len)
    return Trace([first, second], path="<s3>")


GENERATORS: dict[str, Callable[..., Trace]] = {
    "fanout": fanout,
    "multiturn": multiturn,
    "s1": s1,
    "s2": s2,
    "s3": s3,
}
