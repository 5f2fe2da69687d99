"""Align-mode prefill chunks (docs/vllm-rules.md section 6; ``Scheduler._mamba_block_aligned_split``) and the
internal prefill checkpoint (``kv_cache_interface.py:is_mamba_prefill_checkpoint_valid``).

A Mamba state is written only where a step ends, so a prefill chunk of a model with Mamba stops at block
boundaries, at the prompt's last cacheable boundary and at the junction. With internal checkpoints (GDN on
FlashInfer) the chunk that reaches the prompt end writes the state at its last boundary into an extra block
instead of stopping there.
"""

from __future__ import annotations

from sim.align import ceil_div


def checkpoint_valid(B: int, start: int, end: int, checkpoint: int) -> bool:
    """A chunk ``[start, end)`` can export the state at ``checkpoint`` (the alignment divides B here)."""
    return (
        start % B == 0
        and ceil_div(end, B) - 2 > (start - 1) // B
        and start + B <= checkpoint
        and start < checkpoint < end
    )


def exports_checkpoint(B: int, start: int, end: int, prompt_len: int, every_chunk: bool) -> bool:
    """Whether chunk ``[start, end)`` writes an internal checkpoint at ``floor((end - 1)/B)*B``: the chunk
    reaching the prompt end does, and under a retention interval other than 0 every chunk does (the
    coordinator passes ``prefill_end = 0`` then, ``kv_cache_coordinator.py:get_num_blocks_to_allocate``)."""
    return (end >= prompt_len or every_chunk) and checkpoint_valid(B, start, end, (end - 1) // B * B)


def replay_end(num_prompt_tokens: int, num_tokens: int) -> int:
    """Where a prefill of ``num_tokens`` ends (``_mamba_block_aligned_split``'s ``prefill_end``): the prompt's end,
    but one token short of it for a preempted request replaying its outputs (``num_tokens - 1``: its last
    token is decoded)."""
    replaying = 0 < num_prompt_tokens < num_tokens
    return max(num_prompt_tokens, num_tokens - 1) if replaying else num_tokens


def aligned_end(
    B: int,
    start: int,
    end: int,
    prompt_len: int,
    junction: int,
    max_batched: int,
    internal_checkpoints: bool,
    prefill_end: int | None = None,
) -> int:
    """Where a prefill chunk ``[start, end)`` of a model with Mamba really ends. ``prompt_len``: the tokens to
    prefill (vLLM's ``num_tokens``); ``prefill_end``: where its prefill ends, ``prompt_len`` but for a
    preempted request replaying its outputs (``max(num_prompt_tokens, num_tokens - 1)``), whose internal
    checkpoint is taken below that end while the last cacheable boundary stays below ``num_tokens``."""
    prefill_end = prompt_len if prefill_end is None else prefill_end
    last = (prompt_len - 1) // B * B
    checkpoint = (prefill_end - 1) // B * B
    internal = internal_checkpoints and end >= prefill_end and checkpoint_valid(B, start, end, checkpoint)
    if end < prefill_end and (end // B * B > start or B <= max_batched):
        end = end // B * B  # a block wider than the budget advances sub-block instead
    stops = [0 if internal else last, (start // B + 1) * B if start % B and not internal else 0]
    if start < junction < end:
        stops.append(start + (junction - start) // B * B)
    return min([stop for stop in stops if start < stop < end], default=end)
