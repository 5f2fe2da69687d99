"""The why watcher's evicted-prefix chains hashed in a batch (``TreeMissTracker.hash_unhashed``), each chain's
runs built from its parent link's, so a batch costs a step per link it meets, not a walk of every chain's depth.

A chain is ``misses._prefix_link``'s ``(key, chain above)``, root last; its hash is ``hash(TokenSeq(the keys'
runs, root first))``. vLLM+'s chunk run evicts a leaf per 32-token chunk, so a batch of 65,536 chains
(``misses.MAX_UNHASHED``) holds chains of hundreds of links, mostly shared: hashed one by one from their keys
(``misses._prefix_hash``, the reference, switch ``BY_LINKS``) that was ~36 s of a 45 s replay at 1,000 requests.
``TokenSeq``'s merge of adjacent runs is a left fold, and a fold's result folds to itself, so the runs down to
a link are its parent's runs with the parent's last run folded with the link's key: the same tuple, the same hash.
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
        for link in reversed(below):
            runs = runs[:-1] + TokenSeq(runs[-1:] + link[0].runs).runs  # the fold from the last run on
            runs_at[id(link)] = (link, runs)
        return runs


def chain_hasher(reference: Callable[[tuple | None], int]) -> Callable[[tuple | None], int]:
    """What one batch hashes its chains with: a fresh ``ChainHashes``, or ``reference`` with the switch off."""
    return ChainHashes() if BY_LINKS else reference
