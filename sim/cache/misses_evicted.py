"""The why watcher's table of evicted prefixes (``TreeMissTracker.evicted_pages``): an evicted node's first page
(hashed) -> the int of the tokens before it, or a list of them; and its one reader, ``was_evicted``.

An entry is read only where a later match stops at that page: at 1,000 Mooncake requests ``marconi-vllm``
evicts ~392k leaves and its matches read at most one entry each. So where a node names a request whose tokens
begin with its path (``Node.source``: vLLM+'s chunk run hangs each chunk's leaf from its request's own tokens)
and the watcher has the run's ``Trace.request_seq``, its entry is one int from ``_SOURCED_AT`` on naming the
request (a place in the watcher's ``sources``) and the node's start, and its int is made at the read,
``prefix_hash`` of the request's first ``start`` tokens made again from the trace: the normalised runs of the
node's path above it, so the same int its parent's folded link hashes to (``misses_hashing``). The entry is as
small as a hash (an int of 65 bits; held as ``(tokens, start)`` the entries kept every request's tokens:
``marconi-vllm``'s 1M fan-out rose 1,654 -> 2,422 MiB; as ``(request id, start)`` 100,000 rose ~20 MiB). No link
is folded, kept or dropped for it, and no path is climbed to make one. Switch ``SOURCED`` (off, or no trace: every
entry's int made at the eviction from the parent's folded link, the reference;
tests/test_misses_sourced_property.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache.misses_hashing import _prefix_hash, prefix_hash

SOURCED = True
# True: a telling's leaves of one request in a row add their starts to one ``sourced_base`` (a 65-bit int made a
# request, not a leaf: ~400 leaves a request at 1,000); False: ``sourced_entry`` a leaf (the reference)
BASE_KEPT = True

_NONE = object()  # no entry (None is a prefix link: the empty prefix)
_SOURCED_AT = 1 << 64  # above every hash (a 64-bit ``Py_hash_t``): an int from here on is a sourced entry
_START_BITS = 48  # a node's start, below 2 ** 48 tokens; the request's place in ``sources`` above it


def sourced_entry(sources: list[str], source: str, start: int) -> int:
    """The deferred entry of a node at ``start`` on request ``source``'s tokens; ``source`` appended to
    ``sources`` where it is not the last (a chunk run evicts a request's leaves in a row: ~1 place a request)."""
    return sourced_base(sources, source) + start


def sourced_base(sources: list[str], source: str) -> int:
    """``sourced_entry(sources, source, 0)``: what every entry of ``source`` adds its start to while ``source``
    stays ``sources``' last (``BASE_KEPT``: made once for a request's leaves told in a row)."""
    return _SOURCED_AT + (source_place(sources, source) << _START_BITS)


def source_place(sources: list[str], source: str) -> int:
    """``source``'s place in ``sources``: appended where it is not the last (a request's leaves come in a row)."""
    if not sources or sources[-1] is not source:
        sources.append(source)
    return len(sources) - 1


def put_entry(pages: dict[int, Any], key: int, above: Any) -> None:
    """``above`` added to the prefixes before the page hashed to ``key``."""
    earlier = pages.get(key, _NONE)
    if earlier is _NONE:  # one prefix is the common case: kept bare, a list only from the second
        pages[key] = above
    elif type(earlier) is list:
        earlier.append(above)
    else:
        pages[key] = [earlier, above]


def deferred(entry: Any) -> bool:
    """Whether an entry's int is still to be made: a sourced one, or a chain (``misses.FOLD_ON_LINKS`` off)."""
    return entry >= _SOURCED_AT if isinstance(entry, int) else True


def entry_int(entry: Any, request_seq: Callable[[str], Any] | None, sources: list[str]) -> int:
    """A deferred entry's int: a sourced one's (an int; ``request_seq`` and ``sources`` the watcher's), else a
    chain's ``(key, chain above)`` or None, the empty prefix (``misses.FOLD_ON_LINKS`` off)."""
    if isinstance(entry, int):
        place, start = divmod(entry - _SOURCED_AT, 1 << _START_BITS)
        return prefix_hash(request_seq(sources[place]).slice(0, start).runs)  # type: ignore[misc]
    return _prefix_hash(entry)


def was_evicted(
    pages: dict[int, Any],
    tokens,
    depth: int,
    page: int,
    request_seq: Callable[[str], Any] | None,
    sources: list[str],
) -> bool:
    """Whether a node starting at ``depth`` after exactly these tokens was evicted (a deferred entry's int made
    and kept in its place)."""
    first = hash(tokens.first_page(page, depth))
    entry = pages.get(first, _NONE)
    if entry is _NONE:
        return False
    wanted = prefix_hash(tokens.slice(0, depth).runs)
    if type(entry) is not list:
        if deferred(entry):
            entry = pages[first] = entry_int(entry, request_seq, sources)
        return entry == wanted
    for index, prefix in enumerate(entry):
        if deferred(prefix):
            prefix = entry[index] = entry_int(prefix, request_seq, sources)
        if prefix == wanted:
            return True
    return False
