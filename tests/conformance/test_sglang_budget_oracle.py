"""sim's SGLang budget arithmetic (sim/cache/engines/sglang_budget.py) against SGLang 0.5.23's own
``mem_cache/prefill_budget.py`` on a seeded grid of counts: ``check_prefill`` (admit, chunk cap) and
``available_chunk_tokens`` must answer the same for separate FULL/SWA pools and for a FULL pool alone.

Skipped when sglang is not installed (conformance/requirements-sglang.txt).
"""
from __future__ import annotations

import random
from importlib.util import find_spec

import pytest

from conformance import isolated
from conformance.engines import sglang
from sim.cache.engines.sglang_budget import available_chunk_tokens, check_prefill
from tests.conformance.sglang_budget_oracle import answers

pytestmark = pytest.mark.skipif(find_spec("sglang") is None, reason="sglang 0.5.23 is not installed "
                                "(conformance/requirements-sglang.txt)")


def _case(rng: random.Random) -> dict:
    page = rng.choice((16, 32, 64))
    extend, max_new = rng.randint(1, 4000), rng.choice((0, 1, rng.randint(2, 800)))
    swa_pool = page * rng.randint(2, 60)
    swa_available = page * rng.randint(0, swa_pool // page)
    return {"page": page, "window": rng.choice((24, 100, 128, 256, 512)), "extend": extend, "max_new": max_new,
            "total": extend + max_new + page, "chunk_limit": rng.choice((None, 64, 256, 512, 8192)),
            "full_available": page * rng.choice((0, rng.randint(0, 300))),
            "full_evictable": page * rng.choice((0, rng.randint(0, 300))),
            "swa_pool": swa_pool, "mamba": rng.random() < 0.5,
            "swa_available": None if rng.random() < 0.2 else swa_available,
            "swa_evictable": page * rng.randint(0, (swa_pool - swa_available) // page)}


def _ours(case: dict) -> tuple:
    page, swa = case["page"], case["swa_available"] is not None
    remaining_total = case["full_available"] + case["full_evictable"]
    remaining_swa = case["swa_available"] + case["swa_evictable"] if swa else None
    verdict = check_prefill(case["extend"], case["max_new"], case["total"], remaining_total, remaining_swa,
                            case["swa_pool"], case["window"], page, case["chunk_limit"])
    return tuple(verdict), available_chunk_tokens(case["chunk_limit"] or 64, remaining_total, remaining_swa, page)


def test_budget_arithmetic_answers_as_sglangs_prefill_budget():
    rng = random.Random(5023)
    cases = [_case(rng) for _ in range(600)]
    # in the process that runs SGLang for this worker's other tests (tests/conformance/conftest.py): one spawned
    # process of its own imported SGLang a second time, 15-35 s
    theirs = isolated.call_beside(sglang, answers.__module__, answers.__name__, cases)
    mismatches = [(case, mine, their) for case, mine, their in zip(cases, map(_ours, cases), theirs, strict=True)
                  if mine != their]
    assert not mismatches, mismatches[:3]
    verdicts = {their[0][0] for their in theirs}
    capped = sum(1 for case, their in zip(cases, theirs, strict=True)
                 if their[0][0] and their[0][1] != case["chunk_limit"])
    assert verdicts == {True, False} and capped > 0  # the grid reaches refusals and swa_never_fits' cap
