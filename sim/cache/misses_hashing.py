"""The ints the why watcher knows an evicted prefix by (``prefix_hash``: its normalised runs folded one at a
time), made as each link is made (``fold_key``, switch ``misses.FOLD_ON_LINKS``) or, the reference, from
chains hashed in a batch (``TreeMissTracker.hash_unhashed``, ``ChainHashes``).

``TokenSeq``'s merge of adjacent runs is a left fold, and a fold's result folds to itself, so the runs down to
a link are its parent's runs followed by its key's, the key's first run merged into the last before it where
it continues it: the same tuple, the same hash. A folded link is that pair ``(fold of the runs but the last,
the last)``, and its prefix's int is the pair's own hash, ready when its node's child is evicted: no chain is
kept, no batch walks one. ``fold_key`` states that merge rule inline (a call per run in ``TokenSeq.__init__``,
the hot constructor, would cost every run).
The reference: a chain is ``misses._prefix_link``'s ``(key, chain above)``, root last, kept until a batch of
65,536 (``misses.MAX_UNHASHED``); vLLM+'s chunk run evicts a leaf per 32-token chunk, so a batch holds chains
of hundreds of links, mostly shared: hashed one by one from their keys (``_prefix_hash``, switch ``BY_LINKS``)
that was ~36 s of a 45 s replay at 1,000 requests, through ``ChainHashes`` a step per link.
``tests/test_misses_chain_hashes_property.py`` holds the three equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.tokens import TokenSeq

# Off: each chain hashed alone from its keys (``misses._prefix_hash``): the reference
BY_LINKS = True


_EMPTY = hash(())  # the empty prefix's int


def prefix_hash(runs: tuple) -> int:
    """The int a prefix is known by: its normalised runs folded one at a time, ``hash((before, run))``, so a
    chain's is its parent's fold carried a step a run of its key (a tuple's own hash reads every run again)."""
    if not runs:
        return _EMPTY
    folded = _EMPTY
    for run in runs[:-1]:
        folded = hash((folded, run))
    return hash((folded, runs[-1]))


class ChainHashes:
    """Chains' hashes for one batch: at every link met, the fold of the runs down to it but the last, and
    the last (which the next key may continue), kept by the link's id while the batch lasts (each entry holds
    its link too, so no id is reused while the table stands)."""

    def __init__(self) -> None:
        self.folds_at: dict[int, tuple[tuple, int, tuple | None]] = {}  # id(link) -> (link, fold, last run)

    def __call__(self, link: tuple | None) -> int:
        folded, last = self.fold(link)
        return _EMPTY if last is None else hash((folded, last))

    def fold(self, link: tuple | None) -> tuple[int, tuple | None]:
        """The fold of the normalised runs down to ``link``'s end but the last, and the last (None: none)."""
        folds_at = self.folds_at
        below: list[tuple] = []
        while link is not None and id(link) not in folds_at:
            below.append(link)
            link = link[1]
        folded, last = (_EMPTY, None) if link is None else folds_at[id(link)][1:]
        below.reverse()  # root side first (mypyc: no ``reversed`` of a list of bare tuples)
        for step in below:
            folded, last = fold_key((folded, last), step[0])
            folds_at[id(step)] = (step, folded, last)
        return folded, last


def fold_key(link: tuple | None, key) -> tuple[int, tuple | None]:
    """The folded link below ``link`` (None: the root) for ``key``: the fold of the normalised runs down to the
    key's end but the last, and the last, which the next key may continue (``misses.FOLD_ON_LINKS``)."""
    folded, last = (_EMPTY, None) if link is None else link
    for run in key.runs:  # TokenSeq's fold: a run continuing the last merges into it
        if last is not None and run[0] == last[0] and last[1] + last[2] == run[1]:
            last = (last[0], last[1], last[2] + run[2])
        elif run[2] > 0:
            folded = folded if last is None else hash((folded, last))
            last = run
    return folded, last


def link_hash(link: tuple | None) -> int:
    """A folded link's prefix int, ``prefix_hash`` of its runs: the pair's own hash (``hash((fold, last))``)."""
    return _EMPTY if link is None or link[1] is None else hash(link)


def chain_hasher() -> Callable[[tuple | None], int]:
    """What one batch hashes its chains with: a fresh ``ChainHashes``, or ``_prefix_hash`` with the switch off."""
    return ChainHashes() if BY_LINKS else _prefix_hash


def hash_chains(pages: dict[int, Any], unhashed: list[int]) -> None:
    """The chains put in ``pages`` at ``unhashed``'s keys hashed in place, as ``was_evicted`` would hash them
    (``TreeMissTracker.hash_unhashed``); ``unhashed`` emptied."""
    chain_hash = chain_hasher()  # chains share links: one table
    for key in unhashed:
        entry = pages[key]
        if type(entry) is list:
            entry[:] = [p if isinstance(p, int) else chain_hash(p) for p in entry]
        elif not isinstance(entry, int):
            pages[key] = chain_hash(entry)
    unhashed.clear()


def _prefix_hash(link: tuple | None) -> int:
    """A chain's hash from its keys, walked from the root: what a lookup asks for one chain (``misses``)."""
    return prefix_hash(TokenSeq([run for key in _keys(link) for run in key.runs]).runs)


def _keys(link: tuple | None) -> list:
    """The keys of a ``_prefix_link`` chain, root first."""
    keys = []
    while link is not None:
        keys.append(link[0])
        link = link[1]
    keys.reverse()
    return keys
