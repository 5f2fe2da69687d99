"""A split's two page lists, made without copying the long half where the tree owns its lists.

``RadixTree.split`` gives the new upper half the node's first ``cut`` pages and leaves the rest below. Made as
two slices (``pages[:cut]``, ``pages[cut:]``), every id is copied once and dropped once with the old list. In
``freetoken-budget``'s replay the upper half is the long one (2,000 requests: 6.5 M ids above the cuts, 1.8 M
below, in 3,852 splits), so where nobody but the node holds its list (``RadixTree.owns_page_lists``: set by
rules whose trees are never forked, FreeToken's), the upper half keeps the list itself: the tail is copied out
and deleted from it. Marconi's alpha tuner forks trees whose twin nodes share their lists
(``marconi_fork.py``), where an in-place cut would change the twin's: those trees keep the two slices.
Switch: ``KEEP_HEAD_IN_PLACE`` (tests/test_page_cuts_property.py holds both equal).
"""

from __future__ import annotations

from sim.cache.counted_pages import PageList

# False: both halves are slices and the node's list is dropped (the reference)
KEEP_HEAD_IN_PLACE = True


def cut_pages(pages: PageList, cut: int, owned: bool) -> tuple[PageList, PageList]:
    """``(pages[:cut], pages[cut:])``; where ``owned`` (nobody else holds ``pages``), the first is ``pages``
    itself, cut short."""
    if owned and KEEP_HEAD_IN_PLACE:
        tail = pages[cut:]
        del pages[cut:]
        return pages, tail
    return pages[:cut], pages[cut:]
