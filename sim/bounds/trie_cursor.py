"""A request's sequence walked by a cursor as ``segment_trie.SegmentTrie`` inserts it (``LABELS_IN_PLACE``): the
cursor is a run of the sequence and the offset in it; here are a page's key read from it, its moves, and a child's
label compared from it (``MATCH_CARRIED``: a match that runs to the descent's end, read again by the labels that
continue it)."""

from __future__ import annotations

import bisect

from sim.tokens import TokenSeq, match_runs


def page_key(seq: TokenSeq, run: int, inside: int, page: int, at: int) -> tuple:
    """``seq.first_page(page, at)``, token ``at`` being ``seq.runs[run]``'s ``inside``-th (``at < len(seq)``)."""
    source, offset, count = seq.runs[run]
    if count - inside >= page:  # the usual case: the page lies within one run
        return ((source, offset + inside, page),)
    return seq.first_page(page, at)


def moved_on(runs: tuple, run: int, inside: int) -> tuple[int, int]:
    """The run holding the token ``inside`` tokens into ``runs[run]``, and its offset there."""
    while run < len(runs) and inside >= runs[run][2]:
        inside -= runs[run][2]
        run += 1
    return run, inside


def common_tokens(label: TokenSeq, label_at: int, runs: tuple, run: int, inside: int, limit: int) -> int:
    """How many tokens of ``label`` from ``label_at`` on equal those of ``runs`` from ``runs[run]``'s ``inside``-th
    on, counted until they differ or ``limit`` is reached (then at least ``limit``)."""
    starts = label._run_starts()
    index = bisect.bisect_right(starts, label_at) - 1
    return match_runs(label.runs, index, label_at - starts[index], runs, run, inside, limit)[0]


def carried_common(
    carried: list, label: TokenSeq, label_at: int, at: int, runs: tuple, run: int, inside: int, limit: int
) -> int:
    """``common_tokens`` from our token ``at`` on, ``limit`` reaching the descent's end: the count a child's stop
    reads is the same (a stop is cut at the descent's end anyway). A label that continues the last one compared (the
    same sequence, ``label_at - at`` the same) reads that match, less the tokens descended since (``MATCH_CARRIED``)."""
    if label is carried[0] and label_at - at == carried[1]:
        return carried[2] - at
    common = common_tokens(label, label_at, runs, run, inside, limit)
    carried[0], carried[1], carried[2] = label, label_at - at, at + common
    return common
