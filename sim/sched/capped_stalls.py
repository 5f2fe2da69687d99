"""Running requests whose first prompt chunk no token budget can size to anything: the default loop asks each
step for their chunk and always gets 0, so it remembers the answer for as long as it provably holds.

SGLang's admission check (``check_prefill``) sets a cap on a request's first chunk (``first_chunk_cap``); where
the pass had less than a page of chunk tokens left, the cap is under a page and ``first_chunk_len`` cuts every
first chunk to nothing: the request waits, running, until the loop parks it. ``first_chunk_len(req, c)`` cuts
``c`` when its paged length ``ceil(c / page) * page`` passes the cap, to ``floor_to(kv_len + cap, page) -
kv_len``, a figure without ``c`` in it; a chunk of one token has the least paged length (a page), so where even
that one is cut to nothing, every chunk is. ``chunk_stalled_at`` (a chunk sized to nothing by the rules' own
``chunk_len``, whatever the pools and the pass) must say so too: SGLang's rules do for first chunks, other
rules never (they are never remembered). Nothing of it moves while the request runs: the cap is set once at
admission, the cached length is its match's, and a request given no chunk stays at the start of its prompt; a
request admitted again is a new ``RequestCache``, which the memo tells apart by identity.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.cache.interface import RequestView
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.sched.request import RequestState

# False: every step asks the rules (the reference; tests/test_capped_stalls.py holds both equal)
REMEMBER_CAPPED = True
# False: every step asks the memo again for each capped request and rewrites its stall (the reference;
# tests/test_told_stalls.py holds both equal)
SKIP_TOLD = True


class CappedStalls:
    """A memo, per request id, of a ``RequestCache`` whose first chunk every budget stalls (none where the manager
    is not the radix one)."""

    def __init__(self, manager: CacheManager | None):
        self.manager = manager
        self._capped: dict[str, RequestCache] = {}
        # ids of held requests whose stall a step with chunk tokens left recorded: every later step would ask
        # the memo and write the same reason (its position never moves), so the loop leaves them out
        self.told: set[str] = set()

    def holds(self, request_id: str) -> bool:
        """Whether the request (running, in its prompt) gets no chunk under any budget now (and so, while it
        runs, at every step)."""
        manager = self.manager
        if manager is None or not REMEMBER_CAPPED:
            return False
        req = manager.requests[request_id]
        if req.kv_len != req.cached_len:
            return False
        if self._capped.get(request_id) is req:
            return True
        rules = manager.rules
        if rules.first_chunk_len(req, 1) > 0 or not rules.chunk_stalled_at(manager, req, 1, 0):
            return False
        self._capped[request_id] = req
        return True

    def tell(self, request_id: str, budget: int) -> None:
        """The loop recorded the held request's stall under ``budget`` (a reason where tokens were left)."""
        if budget > 0 and SKIP_TOLD:
            self.told.add(request_id)

    def untold(
        self, running: dict[str, RequestState], requests: Mapping[str, RequestView]
    ) -> list[RequestState]:
        """The running requests in their prompt, less the told ones: each step's walk of the default loop's
        chunks and stalls (the prompt test written in, not a call: it runs for each request at each step)."""
        told = self.told
        return [
            r
            for r in running.values()
            if requests[r.request_id].kv_len < r.prompt_len and r.request_id not in told
        ]

    def forget(self, request_id: str) -> None:
        """The request stopped running (retracted, parked or given up on)."""
        self._capped.pop(request_id, None)
        self.told.discard(request_id)
