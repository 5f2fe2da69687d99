"""SGLang's SWA stamp for the upper half of a split (``RadixTree.split`` where ``split_stamps_halves``)."""

from __future__ import annotations

from sim.cache.node import Node


def just_older(upper: Node, stamp: float) -> float:
    """A stamp just below ``stamp`` and above every other node's below it: SGLang's ``lru.insert_after(child,
    new_node)``. Only the halves of splits since ``stamp``'s touch lie between it and the touch before; they
    are the upper half's ancestors (older the shallower), so the new one goes between the deepest of them
    and ``stamp``."""
    base = -int(-stamp // 1)  # the touch the split halves descend from
    below = float(base - 1)
    node = upper.parent
    while node is not None:
        if below < node.swa_stamp < stamp:
            below = node.swa_stamp
        node = node.parent
    middle = (below + stamp) / 2
    return middle if below < middle < stamp else stamp
