"""A request's sequence walked by a cursor as ``segment_trie.SegmentTrie`` inserts it (``LABELS_IN_PLACE``): the
cursor is a run of the sequence and the offset in it; here are a page's key read from it, its moves, and a child's
label compared from it."""

from __future__ import annotations

import bisect

from sim.tokens import TokenSeq, match_runs

# True: the cursor's page key that crosses a run boundary is cut from the cursor's runs, and a chain an insert adds
# moves its cursor to each of its nodes but past the last (no key is read there: the longest move, to the sequence's
# end); False: the key searched for and sliced out of the sequence, every move made (the reference;
# tests/test_segment_trie.py holds both equal). Moves by a bisect of the run starts were no faster (the starts are a
# walk of the runs too) and held every sequence's starts: +16.8 MiB at the 100,000 fan-out with bounds
CURSOR_DIRECT = True


def page_key(seq: TokenSeq, run: int, inside: int, page: int, at: int) -> tuple:
    """``seq.first_page(page, at)``, token ``at`` being ``seq.runs[run]``'s ``inside``-th (``at < len(seq)``)."""
    runs = seq.runs
    source, offset, count = runs[run]
    if count - inside >= page:  # the usual case: the page lies within one run
        return ((source, offset + inside, page),)
    if not CURSOR_DIRECT or not at and page >= seq.length:  # the whole sequence: ``slice`` hands all its runs
        return seq.first_page(page, at)
    # the page's pieces, run by run, as ``slice`` cuts them: the runs that start before the page's or the sequence's
    # end (an empty last run does not), ``at`` where the next one starts
    key = [(source, offset + inside, count - inside)]
    left, at, end = page - count + inside, at + count - inside, seq.length
    run += 1
    while left > 0 and at < end:
        source, offset, count = runs[run]
        key.append((source, offset, min(count, left)))
        left, at, run = left - count, at + count, run + 1
    return tuple(key)


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
