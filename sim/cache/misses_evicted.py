"""The why watcher's table of evicted prefixes (``TreeMissTracker.evicted_pages``): an evicted node's first page
(hashed) -> the int of the tokens before it, or a list of them; and its one reader, ``was_evicted``.

An entry is read only where a later match stops at that page: at 1,000 Mooncake requests ``marconi-vllm``
evicts ~392k leaves and its matches read at most one entry each. So where a node names a request whose tokens
begin with its path (``Node.source``: vLLM+'s chunk run hangs each chunk's leaf from its request's own tokens)
and the watcher has the run's ``Trace.request_seq``, its entry is ``(request id, start)`` and its int is made
at the read, ``prefix_hash`` of the request's first ``start`` tokens, made again from the trace: the normalised
runs of the node's path above it, so the same int its parent's folded link hashes to (``misses_hashing``). The
entry holds the trace's own id string, not a token sequence (an entry lives for the rest of the run: holding
the request's tokens, ``marconi-vllm``'s 1M fan-out rose 1,654 -> 2,422 MiB). No link is folded, kept or dropped
for it, and no path is climbed to make one. Switch ``SOURCED`` (off, or no trace: every entry's int made at the
eviction from the parent's folded link, the reference; tests/test_misses_sourced_property.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache.misses_hashing import _prefix_hash, prefix_hash

SOURCED = True

_NONE = object()  # no entry (None is a prefix link: the empty prefix)


def entry_int(entry: tuple | None, request_seq: Callable[[str], Any] | None) -> int:
    """A deferred entry's int: a sourced one's ``(request id, start)`` (its second an int; ``request_seq`` the
    watcher's), else a chain's ``(key, chain above)`` or None, the empty prefix (``misses.FOLD_ON_LINKS`` off)."""
    if entry is not None and type(entry[1]) is int:
        return prefix_hash(request_seq(entry[0]).slice(0, entry[1]).runs)  # type: ignore[misc]
    return _prefix_hash(entry)


def was_evicted(
    pages: dict[int, Any], tokens, depth: int, page: int, request_seq: Callable[[str], Any] | None
) -> bool:
    """Whether a node starting at ``depth`` after exactly these tokens was evicted (a deferred entry's int made
    and kept in its place)."""
    first = hash(tokens.first_page(page, depth))
    entry = pages.get(first, _NONE)
    if entry is _NONE:
        return False
    wanted = prefix_hash(tokens.slice(0, depth).runs)
    if type(entry) is not list:
        if not isinstance(entry, int):
            entry = pages[first] = entry_int(entry, request_seq)
        return entry == wanted
    for index, prefix in enumerate(entry):
        if not isinstance(prefix, int):
            prefix = entry[index] = entry_int(prefix, request_seq)
        if prefix == wanted:
            return True
    return False
