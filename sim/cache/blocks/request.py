"""What the block cache manager tracks for one running request: a block table per group."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.cache.blocks.hit import Hit
from sim.cache.blocks.keys import KeyChain
from sim.cache.blocks.out_of_map import Unkeyed
from sim.cache.blocks.private import NEVER
from sim.cache.results import MatchResult
from sim.tokens import TokenSeq


@dataclass
class BlockRequest:
    request_id: str
    tokens: TokenSeq  # prompt + every output token (teacher-forced from the trace)
    prompt_len: int
    match: MatchResult
    hit: Hit
    chain: KeyChain  # block keys of the whole blocks seen so far (extended as blocks fill)
    tables: list[list[int | None]]  # per group: block ids by block index, None for the null block
    num_cached: list[int]  # per group: blocks cache_blocks has looked at (a block skipped once stays so)
    retired: list[int]  # per group: Mamba blocks below this index were released
    kv_len: int = 0  # tokens computed
    num_prompt_tokens: int = 0  # the prompt as sent (prompt_len is more after a preemption: its outputs too)
    history: tuple[
        tuple[int, int], ...
    ] = ()  # (engine iteration, tokens) of its last two steps, oldest first
    decode_steps: int = 0
    # where its first token of a source no other request holds is (``private.py``): its blocks ending past it
    # are its own alone, their eviction and skip not told (``private.NEVER``: none, or the watcher not told)
    private_from: int = NEVER
    # its private blocks' mark while kept out unkeyed, and each step's such blocks: (group, blocks, their keys'
    # places in ``chain``) (``lazy_keys.py``)
    unkeyed: Unkeyed = field(default_factory=Unkeyed)
    kept_unkeyed: list[tuple[int, list[int], range | list[int]]] = field(default_factory=list)

    @property
    def replay_boundary(self) -> int:
        """``num_prompt_tokens - 1``: where a later request replaying this prompt resumes."""
        return (self.num_prompt_tokens or self.prompt_len) - 1

    @property
    def cached_len(self) -> int:
        return self.hit.tokens

    @property
    def junction(self) -> int:
        return self.hit.junction

    def processed(self, iteration: int, async_scheduling: bool) -> int:
        """Tokens whose step's output is processed (``num_computed - num_in_flight``): under async scheduling
        the step of the previous iteration is still in flight when this one is scheduled."""
        if async_scheduling and self.history and self.history[-1][0] == iteration - 1:
            return self.kv_len - self.history[-1][1]
        return self.kv_len

    def decodes_steadily(self, iteration: int, lag: int) -> bool:
        """Its prompt is done and its last ``lag`` steps took one token each, in the iterations just before
        ``iteration`` (a steady decode: the processed tokens advance one a step)."""
        history = self.history
        return (
            self.kv_len >= self.prompt_len
            and len(history) >= lag
            and history[-1] == (iteration - 1, 1)
            and (lag == 1 or history[-2] == (iteration - 2, 1))
        )

    def record_step(self, iteration: int, num_tokens: int) -> None:
        self.history = self.history[-1:] + ((iteration, num_tokens),)

    def take_steady_decodes(self, last_at: int, num_steps: int) -> None:
        """``num_steps`` decode steps of one token each taken, the last at iteration ``last_at`` (a run that only
        lengthens the request, or whose block work is done): its last two steps in the history."""
        self.history = ((last_at - 1, 1), (last_at, 1))
        self.kv_len += num_steps
        self.decode_steps += num_steps

    def blocks(self) -> list[int]:
        return [block for table in self.tables for block in table if block is not None]
