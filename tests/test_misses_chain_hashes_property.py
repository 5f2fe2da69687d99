"""The why watcher's batch of evicted-prefix chains hashed from a table of each link's runs
(``misses_hashing.ChainHashes``: a fold of the runs carried link to link) against the reference: each chain
walked from the root, its keys' runs normalised as one ``TokenSeq`` and folded (``misses_hashing._prefix_hash``);
and each link folded as it is made from its parent's fold (``fold_key``, ``link_hash``: ``misses.FOLD_ON_LINKS``).

Chains are generated as a tree of links whose keys' runs often continue the run above them (so the fold merges
across a junction, sometimes over several links in a row) and are asked in any order, repeats included. The
watcher's runs with a tiny batch against its unbatched reference are ``tests/test_misses_hashed_property.py``.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.cache.misses_hashing as hashing
from sim.cache.misses_hashing import ChainHashes
from sim.tokens import TokenSeq

SOURCES = ("r:a", "r:b", "o:x")


@st.composite
def keys(draw, offsets: list[int]) -> TokenSeq:
    """A key of 1-3 runs; a run starting at a source's running offset continues the run before it."""
    runs = []
    for _ in range(draw(st.integers(1, 3))):
        source = draw(st.integers(0, len(SOURCES) - 1))
        start = offsets[source] if draw(st.booleans()) else draw(st.integers(0, 40))
        count = draw(st.integers(1, 5))
        offsets[source] = start + count
        runs.append((SOURCES[source], start, count))
    return TokenSeq(runs)


@st.composite
def chain_trees(draw) -> tuple[list, list[int]]:
    """Links ``(key, parent link)`` (None the root's empty prefix) and the indices of the chains asked."""
    links: list = [None]
    offsets = [0] * len(SOURCES)
    for _ in range(draw(st.integers(1, 30))):
        parent = links[draw(st.integers(0, len(links) - 1))]
        links.append((draw(keys(offsets)), parent))
    asked = draw(st.lists(st.integers(0, len(links) - 1), min_size=1, max_size=40))
    return links, asked


def _line(keys_runs: list[list]) -> tuple[list, list[int]]:
    links: list = [None]
    for runs in keys_runs:
        links.append((TokenSeq(runs), links[-1]))
    return links, list(range(len(links) - 1, -1, -1))


# one source's run continued over four links (merged across each junction), then broken and resumed
LINE = _line(
    [[("r:a", 0, 4)], [("r:a", 4, 4)], [("r:a", 8, 2), ("r:b", 0, 3)], [("r:b", 3, 1)], [("r:a", 10, 5)]]
)


def num_merged_junctions(links: list) -> int:
    return sum(
        link is not None
        and link[1] is not None
        and link[1][0].runs[-1][0] == link[0].runs[0][0]
        and sum(link[1][0].runs[-1][1:]) == link[0].runs[0][1]
        for link in links
    )


@settings(max_examples=300, deadline=None)
@given(tree=chain_trees())
@example(tree=LINE)
def test_chain_hashes_equal_each_chain_hashed_from_its_keys(tree):
    links, asked = tree
    hashes = ChainHashes()
    for index in asked:
        link = links[index]
        runs = TokenSeq([run for key in hashing._keys(link) for run in key.runs]).runs
        assert hashes(link) == hashing._prefix_hash(link) == hashing.prefix_hash(runs)
        assert hashes.fold(link) == (hashing.prefix_hash(runs[:-1]), runs[-1] if runs else None)


def test_the_line_merges_across_junctions_and_reuses_its_links():
    links, asked = LINE
    assert num_merged_junctions(links) >= 3
    hashes = ChainHashes()
    runs = (("r:a", 0, 10), ("r:b", 0, 4), ("r:a", 10, 5))
    assert hashes.fold(links[-1]) == (hashing.prefix_hash(runs[:-1]), runs[-1])
    assert (
        hashes(links[-1])
        == hashing.prefix_hash(runs)
        == hash((hash((hash((hash(()), runs[0])), runs[1])), runs[2]))
    )
    assert len(hashes.folds_at) == len(links) - 1  # every link met once, the root's None kept out
    for index in asked:
        assert hashes(links[index]) == hashing._prefix_hash(links[index])
    assert len(hashes.folds_at) == len(links) - 1


def folded_links(links: list) -> dict[int, tuple | None]:
    """Each link's fold made from its parent's as the watcher makes it (``fold_key``), parents first."""
    folded: dict[int, tuple | None] = {id(None): None}
    for link in links[1:]:
        folded[id(link)] = hashing.fold_key(folded[id(link[1])], link[0])
    return folded


@settings(max_examples=300, deadline=None)
@given(tree=chain_trees())
@example(tree=LINE)
def test_a_link_folded_as_it_is_made_hashes_as_its_chain(tree):
    links, _ = tree
    folded = folded_links(links)
    for link in links:
        runs = TokenSeq([run for key in hashing._keys(link) for run in key.runs]).runs
        assert hashing.link_hash(folded[id(link)]) == hashing._prefix_hash(link) == hashing.prefix_hash(runs)
        if link is not None:
            assert folded[id(link)] == ChainHashes().fold(link)


def test_the_line_folds_across_its_junctions():
    links, _ = LINE
    last = folded_links(links)[id(links[-1])]
    runs = (("r:a", 0, 10), ("r:b", 0, 4), ("r:a", 10, 5))
    assert last == (hashing.prefix_hash(runs[:-1]), runs[-1])
    assert hashing.link_hash(last) == hash((hash((hash((hash(()), runs[0])), runs[1])), runs[2]))
    assert hashing.link_hash(None) == hashing.link_hash((hash(()), None)) == hash(())
