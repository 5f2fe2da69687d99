"""What a trace holds: sizes, sharing structure, and the reuse an ideal cache would get.

The ideal reuse is an upper bound for every policy: an infinite cache, FULL attention only, page 1.
Each request (in file order) reuses the longest prefix of its prompt, capped at ``prompt_len - 1`` (the
last prompt token is always recomputed), that some earlier request's prompt + output starts with.
A radix tree over token runs makes that O(runs) per request instead of O(tokens). Only the head of a sequence
before its tail of tokens no other request holds is inserted (``SHARED_HEADS``): no other prompt can match
into that tail, so the reuse is the same and a fan-out's trie keeps a node per group, not one per request.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from operator import attrgetter, itemgetter

from sim.tokens import Run, TokenSeq, match_runs
from sim.trace.records import Request
from sim.trace.trace import Trace

# Off: every request's whole prompt + output is inserted (the reference ``SHARED_HEADS`` is held to:
# tests/test_ideal_heads_property.py)
SHARED_HEADS = True


class _Node:
    __slots__ = ("edge", "edge_len", "children")

    def __init__(self, edge: tuple[Run, ...]):
        self.edge = edge  # the runs on the way from the parent to this node
        self.edge_len = sum(run[2] for run in edge)
        self.children: dict[tuple[str, int], _Node] = {}  # keyed by the first token (source, offset)


class RunTrie:
    """Every sequence inserted, prefix-closed: ``insert`` returns how much of it was already there."""

    def __init__(self) -> None:
        self.root = _Node(())

    def insert(self, seq: TokenSeq) -> int:
        runs, node, matched, i, offset = seq.runs, self.root, 0, 0, 0
        while i < len(runs):
            key = (runs[i][0], runs[i][1] + offset)
            child = node.children.get(key)
            if child is None:
                node.children[key] = _Node(seq.slice(matched).runs)
                return matched
            step, i, offset = match_runs(child.edge, 0, 0, runs, i, offset)
            matched += step
            if step < child.edge_len:
                if i < len(runs):  # diverges inside the edge: branch there
                    upper = node.children[key] = _split(child, step)
                    rest = seq.slice(matched).runs
                    upper.children[(rest[0][0], rest[0][1])] = _Node(rest)
                return matched
            node = child
        return matched


def _split(node: _Node, at: int) -> _Node:
    """Cut node's edge after `at` tokens; the returned upper node takes node's place."""
    edge = TokenSeq(node.edge)
    upper, lower = _Node(edge.slice(0, at).runs), edge.slice(at).runs
    node.edge, node.edge_len = lower, node.edge_len - at
    upper.children[(lower[0][0], lower[0][1])] = node
    return upper


def ideal_cached_tokens(trace: Trace) -> list[int]:
    """Per request, in file order: the tokens an infinite FULL-attention page-1 cache would reuse."""
    trie, cached = RunTrie(), []
    shared_refs, quoted = shared_refs_and_quoted(trace) if SHARED_HEADS else (set(), set())
    for request in trace:
        request_id = request.id
        prompt_len = trace.prompt_len(request_id)
        # the prompt is a prefix of prompt + output, so one walk both matches and inserts
        if SHARED_HEADS:
            known = trie.insert(trace.shared_head_seq(request_id, shared_refs, quoted))
        else:
            known = trie.insert(trace.request_seq(request_id))
        cached.append(min(known, prompt_len - 1))
    return cached


def shared_refs_and_quoted(trace: Trace) -> tuple[set[str], set[str]]:
    """The refs two or more segments name, and the ids of the requests some prompt quotes: the token sources
    more than one request's prompt + output holds (a quoted output is its own request's too)."""
    # segments read and counted in C: this pass must cost less than the trie work it saves
    segments = list(chain.from_iterable(map(attrgetter("prompt"), trace.requests)))
    refs = Counter(map(itemgetter(0), segments))
    quoted = set(map(itemgetter(2), segments))
    quoted.discard(None)
    return {ref for ref, count in refs.items() if count > 1 and ref is not None}, quoted


def _fanout_groups(trace: Trace) -> list[int]:
    """Sizes of the groups of >= 2 requests whose prompts start with the same segment."""

    def first_key(request: Request) -> tuple:
        first = request.prompt[0]
        return ("ref", first.ref) if first.ref is not None else ("output_of", first.output_of, first.skip)

    sizes = Counter(first_key(r) for r in trace)
    return [size for size in sizes.values() if size >= 2]


def _chain_parent(request: Request) -> str | None:
    if request.after is not None:
        return request.after
    outputs = [s.output_of for s in request.prompt if s.output_of is not None]
    return outputs[-1] if outputs else None


def followup_parent(request: Request) -> str | None:
    """The request whose prompt a follow-up turn extends: the last one whose output it quotes, else the one
    it is sent ``after``; None for a request that is no follow-up."""
    quoted = [s.output_of for s in request.prompt if s.output_of is not None]
    return quoted[-1] if quoted else request.after


def followup_parents(trace: Trace) -> dict[str, str]:
    """Follow-up request id -> the request whose prompt it extends (``followup_parent``)."""
    return {request.id: parent for request in trace if (parent := followup_parent(request)) is not None}


def ideal_decode_region_hits(trace: Trace, cached: list[int]) -> int:
    """Follow-ups an ideal cache (``cached``, per request in file order) serves past the previous prompt + 1:
    the upper bound of the decode-region hits any policy can reach on this trace."""
    parents = followup_parents(trace)
    return sum(
        1
        for request, tokens in zip(trace, cached, strict=True)
        if request.id in parents and tokens > trace.prompt_len(parents[request.id]) + 1
    )


def structure(trace: Trace) -> dict:
    """Requests, follow-ups, multi-turn chains and fan-out groups: cheap, no ideal-reuse pass."""
    chains = _multiturn_chains(trace)
    return {
        "requests": len(trace),
        "followup_requests": len(followup_parents(trace)),
        "multiturn_chains": len(chains),
        "multiturn_requests": sum(chains),
        "fanout_groups": len(_fanout_groups(trace)),
    }


def _multiturn_chains(trace: Trace) -> list[int]:
    """Sizes of the chains of >= 2 requests linked by `after` or by containing an earlier output."""
    root_of: dict[str, str] = {}
    for request in trace:
        parent = _chain_parent(request)
        root_of[request.id] = request.id if parent is None else root_of[parent]
    return [size for size in Counter(root_of.values()).values() if size >= 2]


def trace_stats(trace: Trace) -> dict:
    """Sizes, sharing structure and ideal reuse; JSON-ready, keys in a fixed order."""
    prompt_tokens = sum(trace.prompt_len(r.id) for r in trace)
    arrivals = [r.arrival for r in trace if r.arrival is not None]
    groups, chains = _fanout_groups(trace), _multiturn_chains(trace)
    per_request = ideal_cached_tokens(trace)
    cached = sum(per_request)
    return {
        "requests": len(trace),
        "open_loop_requests": sum(1 for r in trace if r.after is None),
        "closed_loop_requests": sum(1 for r in trace if r.after is not None),
        "prompt_tokens": prompt_tokens,
        "output_tokens": sum(r.output_len for r in trace),
        "arrival_span_s": max(arrivals) - min(arrivals) if arrivals else 0.0,
        "fanout_groups": len(groups),
        "fanout_requests": sum(groups),
        "fanout_largest_group": max(groups, default=0),
        "followup_requests": len(followup_parents(trace)),
        "multiturn_chains": len(chains),
        "multiturn_requests": sum(chains),
        "multiturn_chain_len_mean": sum(chains) / len(chains) if chains else 0.0,
        "multiturn_chain_len_max": max(chains, default=0),
        "multiturn_chain_len_counts": {str(n): c for n, c in sorted(Counter(chains).items())},
        "ideal_cached_tokens": cached,
        "ideal_cached_fraction": cached / prompt_tokens if prompt_tokens else 0.0,
        "ideal_decode_region_hits": ideal_decode_region_hits(trace, per_request),
    }
