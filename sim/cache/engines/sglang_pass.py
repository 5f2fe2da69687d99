"""What a new ``PrefillAdder`` starts from and whether it has room, as the SGLang loop asks at every pass.

``running_decode_offset_of`` is ``total_offset`` over the running batch in one loop over the manager's requests:
each running request's ``max_new_tokens`` as ``init_req_max_new_tokens`` clipped it, less the decode it has
done (and the steps ``steps_ahead``), plus one for a step in flight, clipped to ``[0, CLIP_MAX_NEW_TOKENS]``.
It is the arithmetic of ``max_new_tokens_for_memory`` and ``running_decode_offset`` written out per request
(no list, no call per request): a timed run begins ~3 passes a step, each over every running request.
``running_decode_offset_stepwise`` is the rule as first written (a list of what each owes, summed) and stays
the reference; tests/test_sglang_pass_property.py holds the two equal at every pass of generated runs.

``budget_state``'s memory test counts the tree's evictable tokens (a walk over the holders' paths) only where
the free tokens alone do not already exceed both offsets: evictable tokens are never negative (the locked
pages are among the tree's), so there the answer is room either way. ``budget_state_stepwise`` (always
counted) is its reference in the same test.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Callable

from sim.cache.engines.sglang_budget import CLIP_MAX_NEW_TOKENS, running_decode_offset
from sim.cache.request import RequestCache


def running_decode_offset_of(
    requests: Iterable[RequestCache],
    in_flight: AbstractSet[str],
    steps_ahead: int,
    full_pool_tokens: int,
    page: int,
) -> int:
    """The running batch's decode reserved (``PrefillAdder.__init__``'s ``total_offset``); a request still in
    its prompt owes nothing yet. ``full_pool_tokens`` 0: no clip to the pool (the rules' ``_max_new``)."""
    offset = 0
    for req in requests:
        prompt_len = req.prompt_len
        if req.kv_len < prompt_len:
            continue
        max_new = len(req.tokens) - prompt_len
        if full_pool_tokens:  # max_new_tokens_for_memory: the pool beside the paged prompt, a page, a token
            room = full_pool_tokens - -(-prompt_len // page) * page - page - 1
            if room < max_new:
                max_new = room
            if max_new < 0:
                max_new = 0
        owed = max_new - 1 - req.decode_steps - steps_ahead
        if req.request_id in in_flight:
            owed += 1
        if owed > 0:
            offset += owed if owed < CLIP_MAX_NEW_TOKENS else CLIP_MAX_NEW_TOKENS
    return offset


def running_decode_offset_stepwise(
    requests: Iterable[RequestCache],
    in_flight: AbstractSet[str],
    steps_ahead: int,
    max_new: Callable[[RequestCache], int],
) -> int:
    """The reference: what each running request owes, listed, then clipped and summed."""
    owed = [
        max_new(r) - 1 - r.decode_steps - steps_ahead + (r.request_id in in_flight)
        for r in requests
        if r.kv_len >= r.prompt_len
    ]
    return running_decode_offset(owed)


def budget_state_stepwise(rules, manager) -> str:
    """The reference ``budget_state``: the tree's evictable tokens counted at every call."""
    b = rules.pass_budget
    free = rules.free_tokens(manager, swa=False)
    evictable = rules.evictable_tokens(manager, None, swa=False)
    room = free + evictable - b.total > 0 and free + evictable - b.current > 0
    if room and rules.swa_budget:
        remaining = rules._remaining_swa(manager, None, 0)
        room = remaining is not None and remaining > 0
    if not room:
        return "no_token"
    return "other" if b.input <= 0 or b.chunk <= 0 else "continue"
