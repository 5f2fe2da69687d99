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

- ``hrrn`` matches as ``lpm`` does (and falls back as it does) and puts first the highest ratio of the prefill
  tokens processed since the request entered the queue (``sglang_clock``) to its prompt tokens not cached,
  ties by request id; a request with nothing to prefill goes first, an in-batch repeat last.
- ``dfs-weight`` matches every waiting request as ``lpm`` does (never falling back) and orders them by the
  tree (``_sort_by_dfs_weight``, ``_dfs_weight_order``): depth first from the root, each node's children
  heaviest first (a node's weight: the waiting requests whose match ends in its subtree; equal weights keep
  the children's order), a node's own requests after its children's, in queue order.

The sort is in place: the order it leaves is the queue the next pass starts from. ``random`` (not
deterministic), ``shortest-prefill-first`` and ``routing-key`` are not modelled.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from sim.cache.engines.sglang_knobs import SCHEDULE_POLICIES
from sim.cache.node import Node
from sim.cache.results import MatchResult
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
        match: Callable[[Any, int], MatchResult],
        known: Callable[[RequestState], int],
        max_new: Callable[[RequestState], int] | None = None,
    ):
        if policy not in SCHEDULE_POLICIES:
            raise ValueError(
                f"schedule_policy {policy!r} is not modelled; choose from {', '.join(SCHEDULE_POLICIES)}"
            )
        self.policy, self.match, self.known = policy, match, known
        self.max_new = max_new or (lambda state: state.output_len)
        # HRRN: the prefill tokens processed since the request (re-)entered the queue (the scheduler sets it)
        self.waited: Callable[[RequestState], int] = lambda state: 0
        self._num_refresh_calls = 0

    def calc_priority(self, waiting: deque[RequestState]) -> None:
        few = len(waiting) <= WAITING_QUEUE_PREFIX_MATCH_MAX  # _determine_active_policy: else FCFS
        if self.policy == "lpm" and few:
            matched, last = self._prefix_matches(waiting)
            _sort_in_place(
                waiting, lambda s: float("inf") if s.request_id in last else -matched[s.request_id]
            )
            return
        if self.policy == "hrrn" and few:
            self._highest_response_ratio_first(waiting)
            return
        if self.policy == "dfs-weight":
            self._depth_first_by_weight(waiting)
            return
        if self.policy == "lof":
            _sort_in_place(waiting, lambda state: -self.max_new(state))
        self._touch_waiting_prefixes(waiting)

    def _prefix_matches(self, waiting: deque[RequestState]) -> tuple[dict[str, int], set[str]]:
        """``_compute_prefix_matches``: each request's ``num_matched_prefix_tokens``, and the requests the
        in-batch prefix caching check puts last (``temporary_deprioritized``)."""
        matched: dict[str, int] = {}
        last: set[str] = set()
        heads: set = set()  # the first 32 tokens of each request the in-batch check let through
        for state in waiting:
            assert state.tokens is not None, "a request is queued with its tokens"
            known = self.known(state)
            prefix_len = self.match(state.tokens, known).cached_len
            matched[state.request_id] = min(prefix_len, known - 1)
            if prefix_len > IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD:
                continue
            head = state.tokens.slice(0, IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD)
            if known >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD and head in heads:
                last.add(state.request_id)
            elif known >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD:
                heads.add(head)
        return matched, last

    def _highest_response_ratio_first(self, waiting: deque[RequestState]) -> None:
        """``_sort_by_hrrn``: the highest ratio of prefill tokens processed while waiting to prompt tokens
        still to prefill first, ties by request id; nothing to prefill first of all, in-batch repeats last."""
        matched, last = self._prefix_matches(waiting)

        def key(state: RequestState) -> tuple[float, str]:
            rid = state.request_id
            uncached = state.prompt_len - matched[rid]
            if rid in last:
                return float("inf"), rid
            if uncached <= 0:
                return -float("inf"), rid
            return -(self.waited(state) / uncached), rid

        _sort_in_place(waiting, key)

    def _depth_first_by_weight(self, waiting: deque[RequestState]) -> None:
        """``_compute_prefix_matches`` then ``_sort_by_dfs_weight``."""
        at_node: dict[Node, list[RequestState]] = {}
        for state in waiting:
            at_node.setdefault(self.match(state.tokens, self.known(state)).tree_node, []).append(state)
        ordered = _dfs_weight_order(at_node)
        waiting.clear()
        waiting.extend(ordered)

    def _touch_waiting_prefixes(self, waiting: deque[RequestState]) -> None:
        """``SchedulePolicy._touch_waiting_prefixes``: every 32nd pass the waiting requests' prefixes are
        matched (split and refreshed as a match does), the head last; a pass with none waiting is not counted."""
        if not waiting:
            return
        calls, self._num_refresh_calls = self._num_refresh_calls, self._num_refresh_calls + 1
        if calls % WAITING_PREFIX_REFRESH_INTERVAL:
            return
        for state in reversed(list(waiting)[:WAITING_QUEUE_PREFIX_MATCH_MAX]):
            self.match(state.tokens, self.known(state))  # for its splits and refreshes


def _sort_in_place(waiting: deque[RequestState], key: Callable[[RequestState], Any]) -> None:
    ordered = sorted(waiting, key=key)  # stable, as list.sort
    waiting.clear()
    waiting.extend(ordered)


def _dfs_weight_order(at_node: dict[Node, list[RequestState]]) -> list[RequestState]:
    """``_dfs_weight_order``: depth first, heaviest child first, a node's own requests after its children's.
    Only subtrees holding a match are walked: the others add nothing and sort last."""
    weight: dict[Node, int] = {}
    root = None
    for node, states in at_node.items():
        while node is not None:  # every ancestor's subtree holds them (the root's parent is None)
            weight[node] = weight.get(node, 0) + len(states)
            root, node = node, node.parent
    ordered: list[RequestState] = []
    stack: list[tuple[Node, bool]] = [(root, False)] if root is not None else []
    while stack:
        node, children_done = stack.pop()
        if children_done:
            ordered += at_node.get(node, [])
            continue
        stack.append((node, True))
        heavy = sorted((c for c in node.children.values() if c in weight), key=lambda c: -weight[c])
        stack += [(child, False) for child in reversed(heavy)]
    return ordered


def scheduler_order(
    policy: str, manager: Any, known: dict[str, int], max_new: dict[str, int], clock: Any
) -> WaitingOrder:
    """The scheduler's waiting order, asking the manager's tree (``match_kv_cache`` on all of a waiting request's
    tokens: no prompt-less-one limit) and the scheduler's tables: ``known``, a retracted request's tokens to
    prefill again (else its prompt); ``max_new``, ``max_new_tokens`` as ``init_req_max_new_tokens`` left it;
    ``clock``, the HRRN wait. Not the scheduler itself: an order holding its scheduler would make a cycle, and
    a timed run's every request would then wait for the cycle collector after the run (~20 ms at 1,000)."""
    order = WaitingOrder(
        policy,
        lambda tokens, num_known: manager.rules.match(manager.tree, tokens, num_known + 1),
        lambda state: known.get(state.request_id, state.prompt_len),
        lambda state: max_new[state.request_id],
    )
    order.waited = lambda state: clock.waited(state.request_id)
    return order
