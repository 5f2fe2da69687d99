"""SGLang 0.5.23's waiting-queue order (``--schedule-policy``, ``SchedulePolicy.calc_priority``), asked once per
prefill pass that gets past the pass's early returns.

- ``fcfs`` (the default) keeps arrival order; ``lof`` sorts by the longest output (``max_new_tokens`` as
  ``init_req_max_new_tokens`` clipped it, 0 where the pool left no room), stable.
  Both, cache-agnostic, touch the waiting requests' prefixes every 32nd pass with requests waiting
  (``_touch_waiting_prefixes``: a match's splits and refreshes, the head last).
- ``lpm`` matches every waiting request against the tree (``_compute_prefix_matches``: a real match, so it
  splits and refreshes the tree every pass) and sorts by the longest match, stable; a request matching at most
  32 tokens whose first 32 tokens an earlier such request shares is put last (in-batch prefix caching: one of
  them goes first so the rest can reuse it). Over 128 waiting requests it falls back to FCFS
  (``_determine_active_policy``).

The sort is in place: the order it leaves is the queue the next pass starts from. ``random`` (not
deterministic) and ``dfs-weight`` are not modelled.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from sim.cache.engines.sglang_knobs import SCHEDULE_POLICIES
from sim.sched.request import RequestState

WAITING_PREFIX_REFRESH_INTERVAL = 32  # schedule_policy.py: waiting prefixes are touched every 32nd pass
WAITING_QUEUE_PREFIX_MATCH_MAX = 128  # above this many waiting, LPM falls back to FCFS
IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD = 32  # a request matching at most this many tokens is checked
IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 32  # ... and put last if a checked one shares this many


class WaitingOrder:
    """``SchedulePolicy``: ``known(state)`` is the tokens a waiting request prefills (prompt, plus the
    processed outputs of a retracted one); ``match(tokens, length)`` matches them against the tree;
    ``max_new(state)`` its ``sampling_params.max_new_tokens`` (None: its output length)."""

    def __init__(
        self,
        policy: str,
        match: Callable[[Any, int], int],
        known: Callable[[RequestState], int],
        max_new: Callable[[RequestState], int] | None = None,
    ):
        if policy not in SCHEDULE_POLICIES:
            raise ValueError(
                f"schedule_policy {policy!r} is not modelled; choose from {', '.join(SCHEDULE_POLICIES)}"
            )
        self.policy, self.match, self.known = policy, match, known
        self.max_new = max_new or (lambda state: state.output_len)
        self._num_refresh_calls = 0

    def calc_priority(self, waiting: deque[RequestState]) -> None:
        if self.policy == "lpm" and len(waiting) <= WAITING_QUEUE_PREFIX_MATCH_MAX:
            self._longest_prefix_first(waiting)
            return
        if self.policy == "lof":
            _sort_in_place(waiting, lambda state: -self.max_new(state))
        self._touch_waiting_prefixes(waiting)

    def _longest_prefix_first(self, waiting: deque[RequestState]) -> None:
        """``_compute_prefix_matches`` then ``_sort_by_longest_prefix``."""
        matched: dict[str, float] = {}
        heads: set = set()  # the first 32 tokens of each request the in-batch check let through
        for state in waiting:
            assert state.tokens is not None, "a request is queued with its tokens"
            known = self.known(state)
            prefix_len = self.match(state.tokens, known)
            matched[state.request_id] = -min(prefix_len, known - 1)
            if prefix_len > IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD:
                continue
            head = state.tokens.slice(0, IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD)
            if known >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD and head in heads:
                matched[state.request_id] = float("inf")
            elif known >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD:
                heads.add(head)
        _sort_in_place(waiting, lambda state: matched[state.request_id])

    def _touch_waiting_prefixes(self, waiting: deque[RequestState]) -> None:
        """``SchedulePolicy._touch_waiting_prefixes``: every 32nd pass the waiting requests' prefixes are
        matched (split and refreshed as a match does), the head last; a pass with none waiting is not counted."""
        if not waiting:
            return
        calls, self._num_refresh_calls = self._num_refresh_calls, self._num_refresh_calls + 1
        if calls % WAITING_PREFIX_REFRESH_INTERVAL:
            return
        for state in reversed(list(waiting)[:WAITING_QUEUE_PREFIX_MATCH_MAX]):
            self.match(state.tokens, self.known(state))


def _sort_in_place(waiting: deque[RequestState], key: Callable[[RequestState], float]) -> None:
    ordered = sorted(waiting, key=key)  # stable, as list.sort
    waiting.clear()
    waiting.extend(ordered)
