"""Where a request's SWA frontier moves: the engines' out-of-window freeing rules.

Only the *position* is computed here; the manager frees the request's own pages below it. Positions a
request got from (or gave to) the tree are never freed by the request: the frontier is floored there.
"""
from __future__ import annotations

from sim.cache.policies import FREETOKEN_RULES, Policy
from sim.cache.request import RequestCache


def floor_to(value: int, unit: int) -> int:
    return value // unit * unit


def ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def frontier_for(policy: Policy, req: RequestCache, pre_len: int, window: int,
                 retain_floor: int | None) -> int:
    """The frontier once everything ``pre_len`` no longer needs is freed (SGLang's
    ``free_swa_out_of_window_slots`` threshold, or FreeToken's ``device_len - 1 - W - page``; FreeToken
    also applies it before every prefill chunk, with ``pre_len`` the cached length)."""
    page = policy.page_size
    if policy.rules == FREETOKEN_RULES:
        threshold = pre_len - window - page
    else:
        threshold = pre_len - ceil_to(max(window, page), page)
        if retain_floor is not None:
            threshold = min(threshold, retain_floor)
    return floor_to(max(req.swa_frontier, req.prefix_len, threshold), page)


def decode_trigger_fires(policy: Policy, req: RequestCache, window: int, iteration: int) -> bool:
    """Whether this decode step runs the out-of-window free for ``req`` (before its token is computed)."""
    if req.decode_steps < 1:  # the engines skip a request's first decode step (its extend may be in flight)
        return False
    pre_len = req.kv_len
    if policy.swa_free_trigger == "iterations":
        return iteration % policy.swa_eviction_interval == 0 and pre_len - window >= req.swa_frontier + 1
    return pre_len - window >= req.swa_frontier + policy.swa_eviction_interval


def prefill_commit_fires(req: RequestCache, insert_len: int, window: int) -> bool:
    """SGLang frees out-of-window SWA before each prefill-chunk insert, with ``pre_len = insert_len - 1``."""
    return insert_len - 1 - window >= req.swa_frontier + 1
