"""What the cache manager tracks for one running request."""
from __future__ import annotations

from dataclasses import dataclass, field

from sim.cache.locks import LockSet
from sim.cache.node import Node
from sim.cache.results import MatchResult
from sim.tokens import TokenSeq


@dataclass
class RequestCache:
    request_id: str
    tokens: TokenSeq  # prompt + every output token (teacher-forced from the trace)
    prompt_len: int
    match: MatchResult
    locks: LockSet  # hung from the node ending at prefix_len
    page_size: int
    kv_len: int = 0  # positions whose KV is written
    prefix_len: int = 0  # [0, prefix_len) belongs to the tree (SGLang's cache_protected_len)
    own_full: list[int] = field(default_factory=list)  # pages from prefix_len on
    own_swa: list[int | None] = field(default_factory=list)  # same pages; None once freed
    swa_frontier: int = 0  # positions below it have had this request's SWA freed
    state: int | None = None  # running MAMBA state
    checkpoint: tuple[int, int] | None = None  # (position, state id) not yet handed to the tree
    planned: tuple[tuple[int, int], ...] = ()  # checkpoints the step in flight will save
    spare_states: list[int] = field(default_factory=list)  # slots a checkpoint is saved into (ping-pong)
    decode_steps: int = 0
    commit_pending: bool = False  # the prefill's commit waits for the first decode step (overlap)
    swa_branch: int | None = None  # a FULL hit deeper than its SWA-valid match: the first insert stops there
    first_chunk_cap: int | None = None  # the engine's cap on the first prefill chunk, set at admission

    @property
    def last_node(self) -> Node:
        return self.locks.node

    @property
    def output_len(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def cached_len(self) -> int:
        return self.match.cached_len

    def own_page_index(self, position: int) -> int:
        """Index into own_full / own_swa of the page holding ``position``."""
        return position // self.page_size - self.prefix_len // self.page_size

    def pages_needed(self, new_kv_len: int) -> int:
        """Pages to add so that positions up to ``new_kv_len`` have a slot."""
        have = self.prefix_len // self.page_size + len(self.own_full)
        return max(0, -(-new_kv_len // self.page_size) - have)

    def take_own_pages(self, end: int) -> tuple[list[int], list[int | None]]:
        """Remove and return the own pages for ``[prefix_len, end)`` (they pass to the tree)."""
        count = (end - self.prefix_len) // self.page_size
        full, swa = self.own_full[:count], self.own_swa[:count]
        del self.own_full[:count], self.own_swa[:count]
        return full, swa
