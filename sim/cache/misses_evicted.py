"""The why watcher's table of evicted prefixes (``TreeMissTracker.evicted_pages``): an evicted node's first page
(hashed) -> the int of the tokens before it, or a list of them; and its one reader, ``was_evicted``.

An entry is read only where a later match stops at that page: at 1,000 Mooncake requests ``marconi-vllm``
evicts ~392k leaves and its matches read at most one entry each. So where a node knows a sequence holding its
path (``Node.source``: vLLM+'s chunk run hangs each chunk's leaf from the request's own tokens), its entry is
``(source, start)`` and its int is made at the read, ``prefix_hash`` of the source's first ``start`` tokens:
the normalised runs of the node's path above it, so the same int its parent's folded link hashes to
(``misses_hashing``). No link is folded, kept or dropped for it, and no path is climbed to make one. Switch
``SOURCED`` (off: every entry's int made at the eviction from the parent's folded link, the reference;
tests/test_misses_sourced_property.py).
"""

from __future__ import annotations

from typing import Any

from sim.cache.misses_hashing import _prefix_hash, prefix_hash

SOURCED = True

_NONE = object()  # no entry (None is a prefix link: the empty prefix)


def entry_int(entry: tuple | None) -> int:
    """A deferred entry's int: a sourced one's ``(source, start)`` (its second an int), else a chain's
    ``(key, chain above)`` or None, the empty prefix (``misses.FOLD_ON_LINKS`` off)."""
    if entry is not None and type(entry[1]) is int:
        return prefix_hash(entry[0].slice(0, entry[1]).runs)
    return _prefix_hash(entry)


def was_evicted(pages: dict[int, Any], tokens, depth: int, page: int) -> bool:
    """Whether a node starting at ``depth`` after exactly these tokens was evicted (a deferred entry's int made
    and kept in its place)."""
    first = hash(tokens.first_page(page, depth))
    entry = pages.get(first, _NONE)
    if entry is _NONE:
        return False
    wanted = prefix_hash(tokens.slice(0, depth).runs)
    if type(entry) is not list:
        if not isinstance(entry, int):
            entry = pages[first] = entry_int(entry)
        return entry == wanted
    for index, prefix in enumerate(entry):
        if not isinstance(prefix, int):
            prefix = entry[index] = entry_int(prefix)
        if prefix == wanted:
            return True
    return False
