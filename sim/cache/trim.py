"""FreeToken's finish-time head trim (the cause of FreeToken issue #200).

After a request finishes, only ``[keep_from, prompt_len)`` keeps live SWA on its prompt path, with
``keep_from = page_floor(prompt_len - W - gap)``: every internal, live, unlocked node below it is
tombstoned. A later request diverging more than ``gap`` tokens before the prompt's end then finds no
window of live SWA below its divergence point.
"""
from __future__ import annotations

from sim.cache.align import floor_to
from sim.cache.tree import FULL, SWA, RadixTree
from sim.tokens import TokenSeq


def trim_head(tree: RadixTree, tokens: TokenSeq, prompt_len: int, window: int, gap: int) -> int:
    """Tombstone the head of the prompt path; returns the SWA pages freed."""
    page = tree.page_size
    prompt_end = floor_to(prompt_len, page)
    keep_from = floor_to(max(prompt_end - window - gap, 0), page)
    freed = 0
    if keep_from > 0:
        path, _ = tree.walk(tokens, keep_from)  # splits a node straddling keep_from
        for node in path:
            if node.end <= keep_from and not node.is_leaf and not node.swa_holders:
                freed += tree.tombstone(node)
    _restamp(tree, tokens, prompt_end)
    return freed


def _restamp(tree: RadixTree, tokens: TokenSeq, prompt_end: int) -> None:
    """FreeToken re-matches the prompt: its path becomes newer than the decode tail just inserted."""
    path, _ = tree.walk(tokens, prompt_end)
    for node in path:
        tree.touch(node, FULL)
        if node.swa_pages is not None:
            tree.touch(node, SWA)
