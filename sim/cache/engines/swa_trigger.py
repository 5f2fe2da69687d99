"""When decode runs the out-of-window SWA free for a request, and, beside it, how many decode steps from
now it stays silent (the fast path's closed form): one rule, written twice side by side, held equal by
tests over windows, pages and intervals that are not multiples of each other.
"""

from __future__ import annotations

from typing import Protocol


class DecodeProgress(Protocol):
    """What the trigger reads of a running request (``RequestCache`` has it)."""

    kv_len: int
    decode_steps: int
    swa_frontier: int


class SwaTrigger:
    """``tokens``: per request, once ``pre_len - W >= frontier + interval`` (SGLang 0.5.23's hysteresis);
    ``iterations``: on engine iterations whose global index is a multiple of the interval, if the frontier
    can move at all. Both skip a request's first decode step (its extend may still be in flight)."""

    def __init__(self, mode: str, interval: int, window: int):
        self.by_iterations = mode == "iterations"
        self.interval = interval
        self.window = window

    def fires(self, req: DecodeProgress, iteration: int, lag: int = 0) -> bool:
        """``lag``: tokens in KV whose output the engine has not processed yet (its ``seqlen`` trails)."""
        if req.decode_steps < 1:
            return False
        pre_len = req.kv_len - lag
        if self.by_iterations:
            return iteration % self.interval == 0 and pre_len - self.window >= req.swa_frontier + 1
        return pre_len - self.window >= req.swa_frontier + self.interval

    def silent_steps(self, req: DecodeProgress, iteration: int) -> int:
        """Decode steps from ``iteration`` on that certainly do not fire (may be fewer than the truth)."""
        if self.by_iterations:
            return -iteration % self.interval
        first = 0 if req.decode_steps >= 1 else 1
        return max(first, req.swa_frontier + self.interval + self.window - req.kv_len)
