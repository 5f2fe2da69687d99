"""The trie's cursor helpers against the sequences themselves: ``CURSOR_DIRECT``'s page keys against
``first_page`` (the trie built both ways: tests/test_segment_trie.py)."""

from __future__ import annotations

import os
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bounds import trie_cursor
from sim.tokens import TokenSeq

EXAMPLES = int(os.environ.get("HYBRIDCACHE_HYPOTHESIS_EXAMPLES", "120"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    sources=st.lists(st.sampled_from("ab"), min_size=6, max_size=6),
    last_empty=st.booleans(),
    page=st.integers(1, 12),
)
def test_the_cursor_direct_keys_are_the_sequences(lengths, sources, last_empty, page):
    """``CURSOR_DIRECT``'s page key at every token (cut from the cursor's runs) is ``first_page``'s there; runs of a
    source that continue each other, and an empty last run (a request's own output of no tokens, as ``request_seq``
    makes it), included."""
    runs = [
        (sources[index], sum(lengths[:index]) * (index % 2), count) for index, count in enumerate(lengths)
    ]
    seq = TokenSeq._trusted(tuple(runs + [("o", 0, 0)] * last_empty), sum(lengths))
    cursors = [(run, inside) for run, (_, _, count) in enumerate(seq.runs) for inside in range(count)]
    for at, (run, inside) in enumerate(cursors):
        with mock.patch.object(trie_cursor, "CURSOR_DIRECT", True):
            assert trie_cursor.page_key(seq, run, inside, page, at) == seq.first_page(page, at)
