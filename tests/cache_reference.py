"""A brute-force reference for the match rule, used only by tests.

It flattens the tree into per-token liveness arrays, one per root-to-leaf sequence, and tries every
position P with the rules of SPEC section 4 alone: FULL present for [0, P); a MAMBA state at exactly P
(models with MAMBA); SWA live for [P - W, P) or no tombstone at all in [0, P) (models with SWA).
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.tokens import TokenSeq


@dataclass
class CachedSequence:
    tokens: TokenSeq
    swa_live: list[bool]  # per token
    states_at: set[int]  # positions P with a saved state after the first P tokens


def flatten(manager) -> list[CachedSequence]:
    out: list[CachedSequence] = []

    def visit(node, tokens, live, states):
        if node is not manager.tree.root:
            tokens = tokens + node.key
            live = live + [node.swa_pages is not None] * len(node.key)
            states = states | ({node.end} if node.state is not None else set())
        if not node.children:
            out.append(CachedSequence(tokens, live, states))
        for child in node.children.values():
            visit(child, tokens, live, states)

    visit(manager.tree.root, TokenSeq(), [], set())
    return out


def reference_match(manager, tokens: TokenSeq, prompt_len: int) -> tuple[int, int]:
    """(cached_len, full_depth) as the rules alone give them."""
    if not manager.rules.keeps_cache or prompt_len <= 1:
        return 0, 0
    page = manager.page_size
    key_len = (prompt_len - 1) // page * page
    best = full_depth = 0
    for seq in flatten(manager):
        common = min(seq.tokens.common_prefix_len(tokens), key_len) // page * page
        full_depth = max(full_depth, common)
        for position in range(common, 0, -page):
            if _acceptable(manager, seq, position):
                best = max(best, position)
                break
    return best, full_depth


def _acceptable(manager, seq: CachedSequence, position: int) -> bool:
    if manager.has_mamba and position not in seq.states_at:
        return False
    if not manager.has_swa:
        return True
    window = manager.window
    if all(seq.swa_live[:position]):
        return True
    return position >= window and all(seq.swa_live[position - window:position])
