"""Multi-turn chains in a Mooncake trace, inferred from its block hashes.

Mooncake carries no session id and no text: ``hash_ids`` are prefix-chained hashes of 512-token blocks,
so equal ids at one index mean an equal prompt up to the end of that block. A conversation's next turn
resends the whole earlier prompt, then the answer, then a new question. In hashes: the follow-up's ids
start with all of the earlier prompt's *full* blocks; its next block differs from the earlier prompt's
partial last block, because it holds that partial tail, then the answer, then more.

The rule (``find_parent``): request C follows the earlier request P when C's ids start with P's
``floor(input_length / 512)`` full-block ids, those are at least ``MIN_MATCH_BLOCKS``, and C is longer
than P. Among such P the longest match wins, then the latest in the file. C's prompt is then

    P's prompt (its segments verbatim, so P's partial tail is the same tokens)
    + {"output_of": P, "len": min(P's output_length, C's input_length - P's input_length)}
    + C's remaining tokens, one segment per remaining block of C: ``mc<id>`` from a block's start,
      ``mc<id>@<offset>`` where the new tokens start inside a block

so token equality matches the hashes as far as they can tell: the whole-block ids are checked, the
partial tail and the answer are assumed. What a hash cannot tell: whether the client resent the whole
answer (a client that drops reasoning keeps its end, not its start), and whether C is a follow-up or a
sibling that happens to share P's full blocks (an edited question over the same document). One block
is not enough evidence: in Mooncake's conversation trace block 0 is a system prompt that all 12,031
requests share, so a one-block match would chain nearly every request to some short one.
"""

from __future__ import annotations

from dataclasses import dataclass

MOONCAKE_BLOCK_LEN = 512
MIN_MATCH_BLOCKS = 2


@dataclass
class ChainCounts:
    """What the inference found, for the import's report."""

    followups: int = 0  # requests given an output_of segment
    output_cut: int = 0  # follow-ups that reach less than the whole of the parent's output
    ambiguous: int = 0  # follow-ups whose parent was chosen among >= 2 with the same full blocks
    short_matches: int = 0  # requests left unchained: their only match was < MIN_MATCH_BLOCKS blocks


@dataclass(frozen=True, slots=True)
class Turn:
    """One imported request as the parent search sees it."""

    index: int  # position in the file's requests
    hash_ids: list[int]
    input_len: int
    output_len: int

    @property
    def full_blocks(self) -> int:
        return self.input_len // MOONCAKE_BLOCK_LEN


@dataclass(frozen=True, slots=True)
class Parent:
    turn: Turn
    num_candidates: int  # 1, or 2 when other earlier requests with the same full blocks qualified too


class ChainFinder:
    """Earlier requests by (number of full blocks, id of the last one): O(blocks) lookups per request."""

    def __init__(self, min_match_blocks: int = MIN_MATCH_BLOCKS, whole_output_only: bool = False):
        """``whole_output_only``: a follow-up must hold the parent's whole output (an earlier request it
        reaches less far beyond is taken for a sibling that shares its full blocks, not a parent)."""
        if min_match_blocks < 1:
            raise ValueError(f"min_match_blocks must be >= 1, got {min_match_blocks}")
        self.min_match_blocks, self.whole_output_only = min_match_blocks, whole_output_only
        self._ending_at: dict[tuple[int, int], list[Turn]] = {}

    def add(self, turn: Turn) -> None:
        if turn.full_blocks:
            key = (turn.full_blocks, turn.hash_ids[turn.full_blocks - 1])
            self._ending_at.setdefault(key, []).append(turn)

    def find_parent(self, hash_ids: list[int], input_len: int) -> tuple[Parent | None, int]:
        """The parent (or None) and the length in blocks of the longest match found at all."""
        for num_blocks in range(min(len(hash_ids), input_len // MOONCAKE_BLOCK_LEN), 0, -1):
            found = self._latest_two(
                self._ending_at.get((num_blocks, hash_ids[num_blocks - 1])),
                hash_ids,
                input_len,
                num_blocks,
                self.whole_output_only,
            )
            if found:
                if num_blocks < self.min_match_blocks:
                    return None, num_blocks
                return Parent(found[0], len(found)), num_blocks
        return None, 0

    @staticmethod
    def _latest_two(
        turns: list[Turn] | None, hash_ids: list[int], input_len: int, num_blocks: int, whole_output: bool
    ) -> list[Turn]:
        """The latest two earlier requests that the new one extends (two tell a choice from none)."""
        found: list[Turn] = []
        for turn in reversed(turns or ()):
            reach = turn.input_len + (turn.output_len if whole_output else 1)
            if reach <= input_len and turn.hash_ids[:num_blocks] == hash_ids[:num_blocks]:
                found.append(turn)
                if len(found) == 2:
                    break
        return found


def output_len_reached(parent: Turn, input_len: int) -> int:
    """How much of the parent's output the follow-up holds: all of it, or as far as the follow-up reaches."""
    return min(parent.output_len, input_len - parent.input_len)
