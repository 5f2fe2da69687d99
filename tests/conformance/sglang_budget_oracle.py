"""SGLang 0.5.23's own ``prefill_budget`` on given counts, for the differential test of sim's budget arithmetic.

Runs in the spawned process that runs SGLang (conformance/isolated.py: importing SGLang sets Triton up in the
caller's process otherwise). The allocator and the tree are stand-ins that answer only the counts the budget
reads (free and evictable tokens, pool size).
"""
from __future__ import annotations

from types import SimpleNamespace


def _budget(case: dict):
    from sglang.srt.mem_cache.prefill_budget import PrefillBudget, SWAPrefillBudget

    swa = case["swa_available"] is not None
    allocator = SimpleNamespace(
        page_size=case["page"], size_swa=case["swa_pool"],
        available_size=lambda: case["full_available"], full_available_size=lambda: case["full_available"],
        swa_available_size=lambda: case["swa_available"])
    tree = SimpleNamespace(
        sliding_window_size=case["window"], supports_mamba=lambda: case["mamba"],
        full_evictable_size=lambda: case["full_evictable"], evictable_size=lambda: case["full_evictable"],
        swa_evictable_size=lambda: case["swa_evictable"])
    return (SWAPrefillBudget if swa else PrefillBudget)(allocator, tree)


def answers(cases: list[dict]) -> list[tuple]:
    """Per case: ``check_prefill``'s (admit, chunk cap) and ``available_chunk_tokens``."""
    from conformance.engines import sglang_import

    sglang_import.import_sglang()
    out = []
    for case in cases:
        budget = _budget(case)
        verdict = budget.check_prefill(extend_input_len=case["extend"], total_tokens=case["total"],
                                       max_new_tokens=case["max_new"], input_tokens=case["extend"],
                                       swa_host_hit_length=0, chunk_limit=case["chunk_limit"])
        chunk = budget.available_chunk_tokens(case["chunk_limit"] or 64)
        out.append((tuple(verdict), chunk))
    return out
