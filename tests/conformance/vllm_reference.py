"""A reference model of docs/vllm-rules.md, used only by tests: vLLM 0.33.0's hit, hashing, align-mode chunks
and one shared block pool, written from the document, so that test_vllm_reference can hold the document to
the real engine (conformance/engines/vllm.py). Requests are served one at a time; block ids are not modelled,
only their order in the free queue. Not modelled: preemption (1 of generate's first 1000 pressure scenarios).
"""
from __future__ import annotations

from collections import OrderedDict

from conformance.scenario import EngineConfig, EngineOutcome, Scenario, served_requests

Block = int | None  # None: the null block


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockPool:
    """The free queue (head first) and the cache map: a key keeps every block hashed to it, oldest first."""

    def __init__(self, num_blocks: int) -> None:
        self.free: OrderedDict[int, None] = OrderedDict((block, None) for block in range(1, num_blocks))
        self.key_of: dict[int, tuple] = {}
        self.blocks_of: dict[tuple, list[int]] = {}

    def get_new_blocks(self, count: int) -> list[int]:
        if count > len(self.free):
            raise NotImplementedError("vLLM preempts the request here (docs/vllm-rules.md section 8); "
                                      "the reference does not model preemption")
        popped = [self.free.popitem(last=False)[0] for _ in range(count)]
        for block in popped:
            key = self.key_of.pop(block, None)
            if key is not None:  # eviction
                self.blocks_of[key].remove(block)
                if not self.blocks_of[key]:
                    del self.blocks_of[key]
        return popped

    def touch(self, blocks: list[Block]) -> None:
        for block in blocks:
            self.free.pop(block, None)

    def free_blocks(self, ordered: list[Block]) -> None:
        ordered = [block for block in ordered if block is not None]
        for block in reversed([b for b in ordered if b not in self.key_of]):  # prepended, given order
            self.free[block] = None
            self.free.move_to_end(block, last=False)
        for block in [b for b in ordered if b in self.key_of]:  # appended, given order
            self.free[block] = None

    def cache(self, block: int, key: tuple) -> None:
        if block not in self.key_of:
            self.key_of[block] = key
            self.blocks_of.setdefault(key, []).append(block)

    def cached(self, key: tuple) -> int | None:
        blocks = self.blocks_of.get(key)
        return blocks[0] if blocks else None


class VllmReference:
    def __init__(self, config: EngineConfig, async_scheduling: bool = True) -> None:
        self.config, self.B = config, config.page_size
        self.groups = ["full"] + ["swa"] * config.has_swa + ["mamba"] * config.has_mamba
        self.need = cdiv(config.window - 1, self.B) if config.has_swa else 0
        self.pool = BlockPool(config.num_blocks)
        self.lag = 2 if async_scheduling else 1  # remove_skipped_blocks sees the step before the last one

    def serve(self, prompt: list[int], output: list[int]) -> int:
        chain = self._chain(list(prompt) + list(output))
        hit, junction = self._hit(chain, len(prompt))
        tables = self._admit(chain, hit)
        steps = self._prefill_chunks(hit, len(prompt), junction)
        steps += [(end - 1, end, False) for end in range(len(prompt) + 1, len(prompt) + len(output))]
        retired, num_cached = [0], {g: len(tables[g]) for g in self.groups}
        for index, (_, end, checkpoint) in enumerate(steps):
            processed = steps[index - self.lag][1] if index >= self.lag else hit
            self._release_skipped(tables, processed, retired)
            self._allocate(tables, end, checkpoint)
            boundaries = (len(prompt) - 1, junction)
            self._cache_blocks(tables, chain, num_cached, end, checkpoint, boundaries, len(prompt))
        for group in self.groups:  # KVCacheManager.free: group by group, tail first, leading nulls dropped
            self.pool.free_blocks(list(reversed(tables[group])))
        return hit

    def _chain(self, tokens: list[int]) -> list[int]:
        chain, parent = [], None
        for i in range(len(tokens) // self.B):
            parent = hash((parent, tuple(tokens[i * self.B:(i + 1) * self.B])))
            chain.append(parent)
        return chain

    def _is_cached(self, chain: list[int], group: str, i: int) -> bool:
        return 0 <= i < len(chain) and self.pool.cached((chain[i], group)) is not None

    def _answer(self, group: str, chain: list[int], limit: int) -> int:
        """The largest hit point <= limit this group accepts (section 4)."""
        top = limit // self.B
        if group == "full":
            run = 0
            while run < top and self._is_cached(chain, group, run):
                run += 1
            return run * self.B
        for end in range(top, 0, -1):
            span = range(max(0, end - self.need), end) if group == "swa" else [end - 1]
            if all(self._is_cached(chain, group, i) for i in span):
                return end * self.B
        return 0

    def _hit(self, chain: list[int], num_prompt: int) -> tuple[int, int]:
        full = hit = self._answer("full", chain, num_prompt - 1)
        while True:
            before = hit
            for group in self.groups[1:]:
                hit = self._answer(group, chain, hit)
            if hit >= before:
                return hit, (full if full > hit else 0)

    def _admit(self, chain: list[int], hit: int) -> dict[str, list[Block]]:
        blocks = hit // self.B
        tables: dict[str, list[Block]] = {"full": [self.pool.cached((chain[i], "full")) for i in range(blocks)]}
        if self.config.has_swa:
            skipped = max(0, (hit - self.config.window + 1) // self.B)
            tables["swa"] = [None] * skipped + [self.pool.cached((chain[i], "swa")) for i in range(skipped, blocks)]
        if self.config.has_mamba:
            tables["mamba"] = [None] * (blocks - 1) + [self.pool.cached((chain[blocks - 1], "mamba"))] if blocks else []
        for group in self.groups:
            self.pool.touch(tables[group])
        return tables

    def _prefill_chunks(self, hit: int, num_prompt: int, junction: int) -> list[tuple[int, int, bool]]:
        chunks, start = [], hit
        while start < num_prompt:
            end = start + min(num_prompt - start, self.config.chunked_prefill_size)
            if self.config.has_mamba:
                end = self._aligned_end(start, end, num_prompt, junction)
            chunks.append((start, end, self._exports_checkpoint(start, end, num_prompt)))
            start = end
        return chunks

    def _checkpoint_valid(self, start: int, end: int, checkpoint: int) -> bool:
        B = self.B
        return (self.config.prefill_checkpoints and start % B == 0 and cdiv(end, B) - 2 > (start - 1) // B
                and start + B <= checkpoint and start < checkpoint < end)

    def _exports_checkpoint(self, start: int, end: int, num_prompt: int) -> bool:
        """The Mamba manager writes the state at floor((end-1)/B)*B into an extra block: in every prefill chunk
        when R != 0, else only in the one reaching the prompt end."""
        reaches_end = end >= num_prompt or self.config.retention_interval != 0
        return reaches_end and self._checkpoint_valid(start, end, (end - 1) // self.B * self.B)

    def _aligned_end(self, start: int, end: int, num_prompt: int, junction: int) -> int:
        B = self.B
        last = (num_prompt - 1) // B * B
        internal = end >= num_prompt and self._checkpoint_valid(start, end, last)
        if end < num_prompt and (end // B * B > start or B <= self.config.chunked_prefill_size):
            end = end // B * B
        stops = [0 if internal else last, (start // B + 1) * B if start % B and not internal else 0]
        if start < junction < end:
            stops.append(start + (junction - start) // B * B)
        return min([stop for stop in stops if start < stop < end], default=end)

    def _release_skipped(self, tables: dict[str, list[Block]], processed: int, retired: list[int]) -> None:
        if self.config.has_swa:
            table = tables["swa"]
            freed = []
            for i in range(min(len(table), max(0, (processed - self.config.window + 1) // self.B)) - 1, -1, -1):
                if table[i] is None:
                    break
                freed.append(table[i])
                table[i] = None
            self.pool.free_blocks(freed)
        if self.config.has_mamba and processed > 1:
            table = tables["mamba"]
            last = min((processed - 1) // self.B, len(table))
            freed = [table[i] for i in range(last - 1, retired[0] - 1, -1) if table[i] is not None]
            for i in range(retired[0], last):
                table[i] = None
            self.pool.free_blocks(freed)
            retired[0] = max(retired[0], last)

    def _allocate(self, tables: dict[str, list[Block]], end: int, checkpoint: bool) -> None:
        needed = cdiv(end, self.B)
        for group in self.groups:
            table = tables[group]
            if group == "mamba":
                if needed <= len(table) and not checkpoint:
                    continue
                table.extend([None] * max(0, needed - 1 - checkpoint - len(table)))
            table.extend(self.pool.get_new_blocks(max(0, needed - len(table))))

    def _cache_blocks(self, tables, chain, num_cached, end, checkpoint, boundaries, num_prompt) -> None:
        full_blocks = end // self.B
        kept_checkpoints = {(num_prompt - 1) // self.B * self.B, boundaries[1]}
        for group in self.groups:
            for i in range(num_cached[group], min(full_blocks, len(tables[group]))):
                exported = (group == "mamba" and checkpoint and i == cdiv(end, self.B) - 2
                            and (i + 1) * self.B in kept_checkpoints)
                if tables[group][i] is not None and (self._reachable(group, i, boundaries) or exported):
                    self.pool.cache(tables[group][i], (chain[i], group))
            num_cached[group] = max(num_cached[group], full_blocks)

    def _reachable(self, group: str, i: int, boundaries: tuple[int, int]) -> bool:
        """reachable_block_mask (section 5)."""
        R, B = self.config.retention_interval, self.B
        if group == "full" or R is None:
            return True
        ends = [boundary // B for boundary in boundaries if boundary]
        if group == "swa":
            per = R // B
            if R and (self.need >= per or i % per >= per - self.need):
                return True
            return any(end - self.need <= i < end for end in ends)
        if R and (R // B <= 1 or (i + 1) % (R // B) == 0):
            return True
        return any(i == end - 1 for end in ends)


def run(scenario: Scenario, async_scheduling: bool = True) -> dict[str, EngineOutcome]:
    model = VllmReference(scenario.config, async_scheduling)
    return {served.request_id: EngineOutcome(model.serve(served.prompt, served.output))
            for served in served_requests(scenario)}
