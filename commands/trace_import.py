"""What ``cli.py trace import`` does: run the format's importer, write the trace, say what it found."""

from __future__ import annotations

import time

from sim.trace import Trace, write_trace
from sim.trace.azure_import import import_azure
from sim.trace.conversation_import import TextOptions
from sim.trace.dataset_import import import_openai_jsonl, import_sglang_agentic, import_sharegpt
from sim.trace.mooncake_chains import ChainCounts
from sim.trace.mooncake_import import import_mooncake_counted
from sim.trace.stats import structure

_TEXT = ("chars_per_token", "request_rate", "think_time", "seed", "output_len", "max_turns")
# the options each format takes besides --limit (each format's command has only these: commands/trace.py)
FORMAT_OPTIONS = {
    "mooncake": ("chains", "whole_output_only", "min_match_blocks"),
    "azure": ("prefix_groups", "shared_len", "seed"),
    "sharegpt": _TEXT,
    "sglang-agentic": _TEXT,
    "openai-jsonl": ("chars_per_token", "request_rate", "seed", "output_len"),
}
_OUTPUT_LEN_DEFAULT = {"sglang-agentic": 220}  # bench_serving's DEFAULT_AGENTIC_OUTPUT_LEN


def run_import(fmt: str, src: str, output: str, limit: int | None, options: dict) -> str:
    """Import, write atomically, and return the report: requests, follow-ups, chains, fan-out groups."""
    started = time.perf_counter()
    trace, counts = _import(fmt, src, limit, options)
    elapsed = time.perf_counter() - started
    write_trace(trace, output)
    return report(trace, counts, elapsed)


def _import(fmt: str, src: str, limit: int | None, options: dict) -> tuple[Trace, ChainCounts | None]:
    if fmt == "mooncake":
        return import_mooncake_counted(src, limit, **options)
    if fmt == "azure":
        return import_azure(src, limit=limit, **options), None
    text = TextOptions(limit=limit, **{"output_len": _OUTPUT_LEN_DEFAULT.get(fmt, 256), **options})
    importer = {
        "sharegpt": import_sharegpt,
        "sglang-agentic": import_sglang_agentic,
        "openai-jsonl": import_openai_jsonl,
    }[fmt]
    return importer(src, text), None


def report(trace: Trace, counts: ChainCounts | None, elapsed_s: float) -> str:
    found = structure(trace)
    lines = [
        f"imported {found['requests']} requests in {elapsed_s:.2f} s: {found['followup_requests']} "
        f"follow-ups in {found['multiturn_chains']} multi-turn chains ({found['multiturn_requests']} "
        f"requests), {found['fanout_groups']} fan-out groups"
    ]
    if counts is not None and counts.followups:
        lines.append(
            f"  inferred from block hashes: {counts.followups} follow-ups; {counts.ambiguous} had "
            f"several candidate parents (the latest taken); {counts.output_cut} reach less than "
            f"the parent's whole output (maybe siblings: --whole-output-only leaves them out)"
        )
    if counts is not None and counts.short_matches:
        lines.append(
            f"  {counts.short_matches} requests share only a shorter prefix (under "
            "--min-match-blocks whole blocks) with an earlier prompt: left unchained"
        )
    return "\n".join(lines)
