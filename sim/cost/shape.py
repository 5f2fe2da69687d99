"""One engine step's batch shape and the attended-key sums the cost model prices it by."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast


def is_count(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class StepShape:
    """One engine step's batch: prefill chunks as (cached_len_before_chunk, chunk_len), decodes as the
    request's context length (tokens already in KV)."""

    prefill: tuple[tuple[int, int], ...] = ()
    decode: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # read as objects: compiled, an ``int`` read would unbox a bool to 1 and a pair of ints check its length
        prefill = tuple(tuple(item) for item in cast(Iterable[Iterable[object]], self.prefill))
        decode = tuple(cast(Iterable[object], self.decode))
        object.__setattr__(self, "prefill", prefill)
        object.__setattr__(self, "decode", decode)
        for index, item in enumerate(prefill):
            if len(item) != 2 or not is_count(item[0], 0) or not is_count(item[1], 1):
                raise ValueError(
                    f"StepShape.prefill[{index}] must be (cached_len >= 0, chunk_len >= 1), got {item}"
                )
        for index, context_len in enumerate(decode):
            if not is_count(context_len, 0):
                raise ValueError(
                    f"StepShape.decode[{index}] must be a context length >= 0, got {context_len!r}"
                )
        if not self.prefill and not self.decode:
            raise ValueError(
                "StepShape has neither prefill nor decode items: a step needs at least one token"
            )

    @classmethod
    def trusted(cls, prefill: tuple[tuple[int, int], ...], decode: tuple[int, ...]) -> StepShape:
        """A shape the engine built from a scheduled batch: valid by construction, so unchecked. Made by the
        class's own ``__new__``: compiled (``sim/compiled_core.py``), ``object.__new__`` refuses the class."""
        shape: StepShape = getattr(cls, "__new__")(cls)  # noqa: B009 (mypy names no native __new__ on a compiled class)
        object.__setattr__(shape, "prefill", prefill)
        object.__setattr__(shape, "decode", decode)
        return shape

    @property
    def num_prefill_tokens(self) -> int:
        return sum(chunk_len for _, chunk_len in self.prefill)

    @property
    def num_decode_tokens(self) -> int:
        return len(self.decode)

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens

    def token_runs(self) -> tuple[tuple[int, int], ...]:
        """Every item as (first position, token count): a decode is a one-token run at its context length."""
        return self.prefill + tuple((context_len, 1) for context_len in self.decode)

    def attended_context(self, window: int | None = None) -> int:
        """Keys attended, summed over the step's tokens: the token at position p sees min(p + 1, window)."""
        return sum(attended_sum(start, count, window) for start, count in self.token_runs())


def _arith_sum(lo: int, hi: int) -> int:
    return (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0


def attended_sum(start: int, count: int, window: int | None = None) -> int:
    """Sum over positions start .. start+count-1 of min(position + 1, window), in closed form."""
    lo, hi = start + 1, start + count
    if window is None or hi <= window:
        return _arith_sum(lo, hi)
    if lo > window:
        return count * window
    return _arith_sum(lo, window) + (hi - window) * window
