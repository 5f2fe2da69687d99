"""The benchmark datasets that carry conversations, each read into a trace (see sim/trace/conversation_import.py).

- ``sharegpt``: a JSON list of conversations, ``{"id", "conversations": [{"from", "value"}, ...]}``
  (ShareGPT, SGLang bench_serving's ``sharegpt`` and ``custom`` datasets) or ``{"id", "messages":
  [{"role", "content"}, ...]}`` (vLLM ``benchmarks/multi_turn`` after ``convert_sharegpt_to_openai.py``).
  Every user turn becomes a request. bench_serving itself sends only each conversation's first turn with
  the first reply's length: ``max_turns=1`` imports it that way.
- ``sglang-agentic``: bench_serving's agentic trace, ``{"conversations": [[{"messages": [...],
  "prompt_tokens": n}, ...], ...]}``, each turn holding only its new non-assistant messages; the server's
  replies are fed back, so every turn's output length is ``output_len`` (bench_serving's default 220).
- ``openai-jsonl``: bench_serving's ``openai`` dataset, one chat request a line ``{"messages": [...],
  "max_tokens": n}``. Lines are independent requests: an assistant message in a line's history is fixed
  text, not an earlier request's output (the server's replies are discarded), so there is no output_of;
  lines that repeat a history share it as text. Arrivals: Poisson at ``request_rate``.
"""

from __future__ import annotations

import os
import random

from sim.trace.checks import MAX_LEN, TraceError, is_int, shown
from sim.trace.conversation_import import (
    ASSISTANT,
    Message,
    TextOptions,
    conversation_requests,
    open_loop,
    parse_messages,
    text_segment,
)
from sim.trace.files import display_name, open_lines, parse_json, read_text
from sim.trace.generate import _arrivals
from sim.trace.records import Request
from sim.trace.trace import Trace

_DEFAULTS = TextOptions()
_AGENTIC_DEFAULTS = TextOptions(output_len=220)  # bench_serving's DEFAULT_AGENTIC_OUTPUT_LEN


def import_sharegpt(path: str | os.PathLike, options: TextOptions = _DEFAULTS) -> Trace:
    name, data = display_name(path), _json_document(path)
    if not isinstance(data, list):
        raise TraceError(name, None, "file", "must be a JSON list of conversations")
    sessions = []
    for index, item in enumerate(data[: options.limit]):
        messages = _sharegpt_messages(item, f"[{index}]", name)
        session = str(item.get("id", index))
        sessions.append(conversation_requests(messages, f"sg{index}", session, options))
    return open_loop(sessions, options, name)


def _sharegpt_messages(item: object, where: str, path: str):
    if not isinstance(item, dict):
        raise TraceError(path, None, where, "must be a JSON object")
    if "messages" in item:
        return parse_messages(item["messages"], f"{where}.messages", path, "role", "content")
    key = "conversations" if "conversations" in item else "conversation"
    if key not in item:
        raise TraceError(path, None, where, "has neither 'conversations' nor 'messages'")
    turns = item[key]
    role_key = "from" if turns and isinstance(turns[0], dict) and "from" in turns[0] else "role"
    content_key = "value" if turns and isinstance(turns[0], dict) and "value" in turns[0] else "content"
    return parse_messages(turns, f"{where}.{key}", path, role_key, content_key)


def import_sglang_agentic(path: str | os.PathLike, options: TextOptions = _AGENTIC_DEFAULTS) -> Trace:
    name, data = display_name(path), _json_document(path)
    conversations = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(conversations, list):
        raise TraceError(name, None, "conversations", "must be a list of conversations (lists of turns)")
    sessions = []
    for index, turns in enumerate(conversations[: options.limit]):
        where = f"conversations[{index}]"
        if not isinstance(turns, list):
            raise TraceError(name, None, where, "must be a list of turns")
        messages = []
        for t, turn in enumerate(turns):
            if not isinstance(turn, dict) or "messages" not in turn:
                raise TraceError(name, None, f"{where}[{t}]", "must be an object with 'messages'")
            messages += parse_messages(turn["messages"], f"{where}[{t}].messages", name, "role", "content")
            messages.append(_REPLY)  # the server's reply closes each turn
        sessions.append(
            conversation_requests(messages, f"ag{index}", str(index), options, replies_known=False)
        )
    return open_loop(sessions, options, name)


_REPLY = Message(ASSISTANT, "")  # stands for the server's reply, whose text the trace never needs


def import_openai_jsonl(path: str | os.PathLike, options: TextOptions = _DEFAULTS) -> Trace:
    name = display_name(path)
    requests: list[Request] = []
    with open_lines(path) as f:
        for line_no, text in enumerate(f, 1):
            if options.limit is not None and len(requests) >= options.limit:
                break
            if text.strip():
                requests.append(_openai_request(text, name, line_no, options))
    if not requests:
        raise TraceError(name, None, "file", "no requests")
    arrivals = _arrivals("import", len(requests), options.request_rate, random.Random(options.seed))
    timed = [
        Request(id=r.id, arrival=at, prompt=r.prompt, output_len=r.output_len)
        for r, at in zip(requests, arrivals, strict=True)
    ]
    return Trace(timed, path=name)


def _openai_request(text: str, path: str, line: int, options: TextOptions) -> Request:
    obj = parse_json(text, path, line)
    if not isinstance(obj, dict) or not obj.get("messages"):
        raise TraceError(path, line, "messages", "a line must be an object with a non-empty 'messages' list")
    try:
        messages = parse_messages(obj["messages"], "messages", path, "role", "content")
    except TraceError as e:  # parse_messages names the field; the line is known here
        raise TraceError(path, line, e.field, e.message) from None
    output_len = obj.get("max_tokens", obj.get("max_completion_tokens", options.output_len))
    if not is_int(output_len) or not 1 <= output_len <= MAX_LEN:
        raise TraceError(
            path, line, "max_tokens", f"must be a positive integer <= {MAX_LEN}, got {shown(output_len)}"
        )
    return Request(
        id=f"oa-{line}",
        arrival=0.0,
        prompt=[text_segment(m, options) for m in messages],
        output_len=output_len,
    )


def _json_document(path: str | os.PathLike) -> object:
    name = display_name(path)
    return parse_json(read_text(path), name, None)
