"""Importers for the benchmark datasets that carry conversations as text (ShareGPT, vLLM's
``benchmarks/multi_turn`` input, SGLang ``bench_serving``'s agentic trace and OpenAI-request JSONL).

A trace stores no text, so each message becomes a segment whose reference is a hash of its role and
content (equal messages after an equal history share tokens, as a prefix cache sees them) and whose
length is estimated: ``ceil(characters / chars_per_token)`` (4 by default, about right for English with
a BPE tokenizer; CJK text is nearer 1 to 1.5 characters a token). Chat-template tokens are not counted.

A conversation becomes a closed-loop session: its first turn arrives open loop (Poisson arrivals at
``request_rate`` conversations per second from ``seed``), each later turn is sent ``think_time`` seconds
after the previous one finishes. As in vLLM's multi-turn benchmark and SGLang's agentic replay, a turn's
history holds the *server's* earlier replies: ``{"output_of": previous turn}``; the dataset's own reply
only sets the turn's ``output_len``. Bad input raises a TraceError naming the file and the JSON path.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from sim.trace.checks import MAX_LEN, MAX_TIME_S, TraceError, shown
from sim.trace.generate import _arrivals
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

ASSISTANT, USER, SYSTEM = "assistant", "user", "system"
_ROLES = {
    "human": USER,
    "user": USER,
    "tool": USER,
    "observation": USER,
    "function": USER,
    "gpt": ASSISTANT,
    "bing": ASSISTANT,
    "chatgpt": ASSISTANT,
    "bard": ASSISTANT,
    "assistant": ASSISTANT,
    "model": ASSISTANT,
    "system": SYSTEM,
}


@dataclass(frozen=True)
class TextOptions:
    chars_per_token: float = 4.0
    request_rate: float = 1.0  # conversations (or, for independent requests, requests) per second
    think_time: float = 0.0
    seed: int = 0
    output_len: int = 256  # a turn whose reply the dataset lacks (agentic traces: every turn)
    max_turns: int | None = None  # user turns kept per conversation (1: bench_serving's ShareGPT use)
    limit: int | None = None  # conversations (or requests) kept

    def __post_init__(self):
        # below 0.01 characters a token, one message's length would pass 2^31 tokens (and then overflow)
        if not 0.01 <= self.chars_per_token <= 1e6:
            raise ValueError(f"chars_per_token must be a number in [0.01, 1e6], got {self.chars_per_token!r}")
        if not self.request_rate > 0:
            raise ValueError(f"request_rate must be > 0 (inf: all at once), got {self.request_rate!r}")
        if not 0 <= self.think_time < MAX_TIME_S:
            raise ValueError(
                f"think_time must be a finite number >= 0 and < {MAX_TIME_S:g} s, got {self.think_time!r}"
            )
        for name in ("output_len", "max_turns", "limit"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or not 1 <= value <= MAX_LEN):
                raise ValueError(f"{name} must be a positive integer <= {MAX_LEN}, got {value!r}")

    def tokens(self, text: str) -> int:
        return max(1, math.ceil(len(text) / self.chars_per_token))


@dataclass(frozen=True)
class Message:
    role: str  # USER, ASSISTANT or SYSTEM
    content: str


def text_segment(message: Message, options: TextOptions) -> Segment:
    digest = hashlib.sha256(f"{message.role}\0{message.content}".encode()).hexdigest()[:16]
    return Segment(ref=f"txt-{digest}", len=options.tokens(message.content))


def conversation_requests(
    messages: list[Message], name: str, session: str, options: TextOptions, replies_known: bool = True
) -> list[Request]:
    """One request per user turn: the history (server replies as output_of), the turn's new messages.
    ``replies_known=False`` (agentic traces: only the non-assistant messages of each turn are stored)
    gives every turn ``options.output_len``."""
    requests: list[Request] = []
    history: list[Segment] = []
    index = 0
    while index < len(messages) and (options.max_turns is None or len(requests) < options.max_turns):
        new, index = _until_reply(messages, index)
        if not any(m.role == USER for m in new):
            break  # trailing text with no question: no turn
        reply = messages[index] if index < len(messages) and messages[index].role == ASSISTANT else None
        output_len = (
            options.tokens(reply.content) if replies_known and reply is not None else options.output_len
        )
        history = history + [text_segment(m, options) for m in new]
        request_id = f"{name}-t{len(requests) + 1}"
        previous = requests[-1].id if requests else None
        requests.append(
            Request(
                id=request_id,
                session=session,
                after=previous,
                think_time=options.think_time if previous else 0.0,
                arrival=None if previous else 0.0,
                prompt=history,
                output_len=output_len,
            )
        )
        history = history + [Segment(output_of=request_id)]
        index += reply is not None
    return requests


def _until_reply(messages: list[Message], index: int) -> tuple[list[Message], int]:
    """The messages from ``index`` up to the next assistant reply that follows a user message."""
    new: list[Message] = []
    while index < len(messages) and not (
        messages[index].role == ASSISTANT and any(m.role == USER for m in new)
    ):
        new.append(messages[index])
        index += 1
    return new, index


def open_loop(sessions: list[list[Request]], options: TextOptions, path: str) -> Trace:
    """Each session's first request gets a Poisson arrival; the file keeps sessions whole, in start order."""
    sessions = [s for s in sessions if s]
    if not sessions:
        raise TraceError(path, None, "file", "no conversation with a user turn")
    starts = _arrivals("import", len(sessions), options.request_rate, random.Random(options.seed))
    requests = []
    for start, session in zip(starts, sessions, strict=True):
        first = session[0]
        requests.append(
            Request(
                id=first.id,
                session=first.session,
                arrival=start,
                prompt=first.prompt,
                output_len=first.output_len,
            )
        )
        requests.extend(session[1:])
    return Trace(requests, path=path)


def parse_messages(raw: object, where: str, path: str, role_key: str, content_key: str) -> list[Message]:
    """A list of ``{role_key: ..., content_key: ...}`` dicts, every field checked."""
    if not isinstance(raw, list):
        raise TraceError(path, None, where, "must be a list of messages")
    messages = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or role_key not in item or content_key not in item:
            raise TraceError(
                path, None, f"{where}[{i}]", f"must be an object with {role_key!r} and {content_key!r}"
            )
        role = _ROLES.get(str(item[role_key]).lower())
        if role is None:
            raise TraceError(
                path,
                None,
                f"{where}[{i}].{role_key}",
                f"unknown role {item[role_key]!r} (known: {', '.join(sorted(_ROLES))})",
            )
        content = item[content_key]
        if content is None and not _calls_a_tool(item):
            raise TraceError(
                path, None, f"{where}[{i}].{content_key}", "must be a string or a list of parts, got null"
            )
        messages.append(Message(role, _content_text(content, f"{where}[{i}].{content_key}", path)))
    return messages


def _calls_a_tool(message: dict) -> bool:
    """An OpenAI assistant message that calls a tool has no text: its ``content`` is null, honestly."""
    return "tool_calls" in message or "function_call" in message


def _content_text(content: object, where: str, path: str) -> str:
    """A message's text: a string, or OpenAI's list of parts (their text parts joined; images left out)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = {index: part.get("text", "") for index, part in enumerate(content) if isinstance(part, dict)}
        for index, text in parts.items():
            if not isinstance(text, str):
                raise TraceError(path, None, f"{where}[{index}].text", f"must be a string, got {shown(text)}")
        return "".join(parts.values())
    raise TraceError(path, None, where, f"must be a string or a list of parts, got {type(content).__name__}")
