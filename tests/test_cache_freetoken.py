"""FreeToken's finish-time head trim (issue #200) and its lazy fix (PR #488)."""
from __future__ import annotations

import pytest

from sim.cache.solo_run import run_alone
from tests.cache_helpers import hybrid_model, manager, out, seq

W128 = hybrid_model(mamba=False, window=128)
W1024 = hybrid_model(mamba=False, window=1024)


def two_requests(policy, model, first, second, page=1, first_out=16):
    mgr = manager(policy, model, page_size=page, track_interval=page * 256)
    run_alone(mgr, "a", first + out("a", first_out), len(first), first_out, 8192)
    run = run_alone(mgr, "b", second + out("b", 8), len(second), 8, 8192)
    mgr.check_integrity()
    return run.match.cached_len


@pytest.mark.parametrize("policy, expected", [("freetoken", 0), ("freetoken-lazy", 600)])
def test_fanout_after_shared_head(policy, expected):
    first, second = seq(("head", 600), ("ta", 600)), seq(("head", 600), ("tb", 600))
    assert two_requests(policy, W128, first, second) == expected


@pytest.mark.parametrize("policy", ["freetoken", "freetoken-lazy"])
def test_append_reuses_nearly_all(policy):
    first = seq(("head", 600), ("ta", 600))
    second = first + out("a", 16) + seq(("u", 3))
    assert two_requests(policy, W128, first, second) >= 1200 - 128 - 16


def page_rule_reuses(distance: int, prompt_len: int, page: int, window: int = 1024, gap: int = 16) -> bool:
    """Worked out by hand from the trim: the match lands at floor(D) and needs a window of live SWA
    above keep_from = floor(floor(L) - W - gap)."""
    divergence = prompt_len - distance
    keep_from = ((prompt_len // page * page) - window - gap) // page * page
    return divergence // page * page - keep_from >= window


@pytest.mark.parametrize("page", [1, 8, 128])
def test_divergence_rule(page):
    prompt_len = 1886
    for distance in list(range(0, 40)) + [100, 221, 222, 223, 300]:
        first = seq(("s", prompt_len))
        second = seq(("s", prompt_len - distance), ("z", distance)) if distance else first
        cached = two_requests("freetoken", W1024, first, second, page=page)
        assert (cached > 0) == page_rule_reuses(distance, prompt_len, page), (page, distance, cached)
        if page == 1:
            assert (cached > 0) == (distance <= 16)


def test_lazy_reuses_at_every_distance():
    prompt_len = 1886
    for distance in (17, 100, 500, 800):
        first = seq(("s", prompt_len))
        second = seq(("s", prompt_len - distance), ("z", distance))
        assert two_requests("freetoken-lazy", W1024, first, second) == prompt_len - distance


def test_budget_widens_the_cliff():
    prompt_len, distance = 1886, 200
    first = seq(("s", prompt_len))
    second = seq(("s", prompt_len - distance), ("z", distance))
    assert two_requests("freetoken", W1024, first, second) == 0
    mgr = manager("freetoken-budget", W1024, page_size=1, track_interval=256, finish_trim_gap=256)
    run_alone(mgr, "a", first + out("a", 16), prompt_len, 16, 8192)
    assert run_alone(mgr, "b", second + out("b", 8), prompt_len, 8, 8192).match.cached_len == prompt_len - distance
