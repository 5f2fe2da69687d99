"""Blocks only their own request can ever hold, which the why watcher need not record (``UNWATCHES_PRIVATE``).

A block's key stands for its whole prefix (``keys.py``). Where that prefix holds a token of a source no other
request of the trace holds (a ref only one segment names, a request's own output no prompt quotes), no other
request's prompt chain holds the key, and only its own request computes the block: after its first admission,
whose hit the watcher has classified already (it classifies a request's first admission only, a preempted one's
later admissions not again). So no question the watcher is ever asked reads that block's eviction or skip:
leaving them out changes no why column, on any trace, and a fan-out's questions and outputs stop growing the
watcher's sets (~4 KB a request once the pool is full). The run tells the manager the trace's shared sources
(``BlockCacheManager.watch_misses``); a block past its request's ``private_from`` is marked when it is hashed
(``BlockPool.private``), its eviction is not told, and a skip past it is not told.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from sim.tokens import TokenSeq, output_source, ref_source
from sim.trace.stats import shared_refs_and_quoted
from sim.trace.trace import Trace

# Off: every eviction and skip recorded (the reference; tests/test_vllm_private_blocks_property.py holds the two
# runs equal)
UNWATCHES_PRIVATE = True
NEVER = 1 << 60  # a ``private_from`` past any sequence (tokens fit in 31 bits): no block private; a short int


def shared_sources(trace: Trace) -> frozenset[str]:
    """The token sources two or more requests' prompts + outputs hold: refs two or more segments name, and the
    outputs some prompt quotes (``shared_refs_and_quoted``, the ideal reuse's shared heads)."""
    refs, quoted = shared_refs_and_quoted(trace)
    return frozenset([*map(ref_source, refs), *map(output_source, quoted)])


def private_from(tokens: TokenSeq, shared: AbstractSet[str]) -> int:
    """Where ``tokens``' first token of a source not in ``shared`` is (``NEVER``: none): a block ending past it
    is its request's alone."""
    start = 0
    for source, _, length in tokens.runs:
        if source not in shared:
            return start
        start += length
    return NEVER
