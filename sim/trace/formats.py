"""Recognising a public trace or dataset handed where hybridcache's own format is expected.

``load_trace`` asks ``foreign_format`` about the first line it cannot read, so that ``simulate`` on a
raw Mooncake file says to run ``trace import mooncake`` instead of "unknown field hash_ids".
"""

from __future__ import annotations

import json

# format name -> what it is, for messages and `trace import --help`
IMPORT_FORMATS = {
    "mooncake": "Mooncake JSONL (timestamp, input_length, output_length, hash_ids)",
    "azure": "Azure LLM inference CSV (TIMESTAMP,ContextTokens,GeneratedTokens)",
    "sharegpt": "ShareGPT / vLLM benchmarks/multi_turn JSON (a list of conversations)",
    "sglang-agentic": 'SGLang bench_serving agentic trace JSON ({"conversations": [[turn, ...], ...]})',
    "openai-jsonl": 'SGLang bench_serving openai dataset (one {"messages": [...]} chat request a line)',
}


def foreign_format(first_line: str) -> str | None:
    """The import format the first line of a file looks like, or None."""
    text = first_line.strip().lstrip("\ufeff")
    if text.startswith("TIMESTAMP,"):
        return "azure"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return "sharegpt" if text.startswith("[") else "json-document" if text.startswith("{") else None
    except (RecursionError, ValueError):  # nested too deeply, a number too long: no format reads it either
        return None
    if isinstance(obj, dict) and {"hash_ids", "input_length"} <= obj.keys():
        return "mooncake"
    if isinstance(obj, dict) and "messages" in obj and "prompt" not in obj:
        return "openai-jsonl"
    if isinstance(obj, list):
        return "sharegpt"
    return None


def import_hint(fmt: str, path: str) -> str:
    """The sentence that tells a user how to convert the file."""
    source = "FILE" if path == "<stdin>" else path
    if fmt == "json-document":
        return (
            "this looks like a JSON document, not hybridcache's JSONL trace; if it is a dataset, convert "
            f"it first: python cli.py trace import sharegpt|sglang-agentic {source} -o trace.jsonl"
        )
    return (
        f"this looks like {IMPORT_FORMATS[fmt]}, not hybridcache's trace format; convert it first: "
        f"python cli.py trace import {fmt} {source} -o trace.jsonl"
    )
