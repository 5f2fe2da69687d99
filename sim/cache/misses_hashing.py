"""The why watcher's evicted-prefix chains hashed in a batch (``TreeMissTracker.hash_unhashed``), each chain's
runs built from its parent link's, so a batch costs a step per link it meets, not a walk of every chain's depth.

A chain is ``misses._prefix_link``'s ``(key, chain above)``, root last; its hash is ``hash(TokenSeq(the keys'
runs, root first))``. vLLM+'s chunk run evicts a leaf per 32-token chunk, so a batch of 65,536 chains
(``misses.MAX_UNHASHED``) holds chains of hundreds of links, mostly shared: hashed one by one from their keys
(``_prefix_hash``, the reference, switch ``BY_LINKS``) that was ~36 s of a 45 s replay at 1,000 requests.
``TokenSeq``'s merge of adjacent runs is a left fold, and a fold's result folds to itself, so the runs down to
a link are its parent's runs followed by its key's, the key's first run merged into the last before it where
it continues it: the same tuple, the same hash.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.tokens import TokenSeq

# Off: each chain hashed alone from its keys (``misses._prefix_hash``): the reference
BY_LINKS = True


class ChainHashes:
    """Chains' hashes for one batch: the runs down to every link met, kept by the link's id while the batch
    lasts (each entry holds its link too, so no id is reused while the table stands)."""

    def __init__(self) -> None:
        self.runs_at: dict[int, tuple[tuple, tuple]] = {}  # id(link) -> (link, its runs, normalised)

    def __call__(self, link: tuple | None) -> int:
        return hash(self.runs(link))

    def runs(self, link: tuple | None) -> tuple:
        """The normalised runs of the tokens down to ``link``'s end (``TokenSeq(...).runs``)."""
        runs_at = self.runs_at
        below: list[tuple] = []
        while link is not None and id(link) not in runs_at:
            below.append(link)
            link = link[1]
        runs: tuple = () if link is None else runs_at[id(link)][1]
        below.reverse()  # root side first (mypyc: no ``reversed`` of a list of bare tuples)
        for step in below:
            runs = _folded(runs, step[0].runs)
            runs_at[id(step)] = (step, runs)
        return runs


def _folded(runs: tuple, key_runs: tuple) -> tuple:
    """``TokenSeq(runs + key_runs).runs`` for two normalised run tuples (every ``TokenSeq``'s are: its
    invariant): only the junction can merge, the key's first run into the last run before it."""
    if not runs or not key_runs:
        return runs + key_runs
    source, start, count = runs[-1]
    first_source, first_start, first_count = key_runs[0]
    if first_source != source or start + count != first_start:
        return runs + key_runs
    return runs[:-1] + ((source, start, count + first_count),) + key_runs[1:]


def chain_hasher() -> Callable[[tuple | None], int]:
    """What one batch hashes its chains with: a fresh ``ChainHashes``, or ``_prefix_hash`` with the switch off."""
    return ChainHashes() if BY_LINKS else _prefix_hash


def _prefix_hash(link: tuple | None) -> int:
    """A chain's hash from its keys, walked from the root: what a lookup asks for one chain (``misses``)."""
    return hash(TokenSeq([run for key in _keys(link) for run in key.runs]))


def _keys(link: tuple | None) -> list:
    """The keys of a ``_prefix_link`` chain, root first."""
    keys = []
    while link is not None:
        keys.append(link[0])
        link = link[1]
    keys.reverse()
    return keys
