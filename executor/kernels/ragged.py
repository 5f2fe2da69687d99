"""Host-side layout of a ragged batch, shared by every kernel launcher.

Item i holds the tokens of absolute positions ``[starts[i], ends[i])``, packed at rows
``[q_off[i], q_off[i] + lens[i])`` of every activation tensor. The arrays live on the host (numpy) so
launchers can size their grids without a device sync; `on(device)` copies one array once per device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch


def _int_array(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


def to_device(
    values: np.ndarray | Sequence[int], device: torch.device | str, dtype=torch.int32
) -> torch.Tensor:
    """An index array as a device tensor; an empty one becomes one unread element (kernels need a pointer)."""
    arr = np.ascontiguousarray(values if len(values) else np.zeros(1, dtype=np.int64))
    return torch.as_tensor(arr, dtype=dtype, device=device)


@dataclass(frozen=True)
class Ragged:
    starts: np.ndarray
    ends: np.ndarray
    _device_cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        starts, ends = _int_array(self.starts), _int_array(self.ends)
        if starts.shape != ends.shape:
            raise ValueError(f"Ragged: {starts.size} starts but {ends.size} ends")
        bad = np.flatnonzero((starts < 0) | (ends <= starts))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"Ragged item {i}: need 0 <= start < end, got [{starts[i]}, {ends[i]})")
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "ends", ends)

    @property
    def num_items(self) -> int:
        return int(self.starts.size)

    @property
    def lens(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def q_off(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.lens)[:-1])).astype(np.int64)

    @property
    def num_tokens(self) -> int:
        return int(self.lens.sum())

    def token_item(self) -> np.ndarray:
        """Item index of every packed token row."""
        return np.repeat(np.arange(self.num_items, dtype=np.int64), self.lens)

    def positions(self) -> np.ndarray:
        """Absolute position of every packed token row."""
        return np.concatenate(
            [np.arange(s, e, dtype=np.int64) for s, e in zip(self.starts, self.ends, strict=True)]
        )

    def on(self, name: str, device: torch.device | str, dtype=torch.int32) -> torch.Tensor:
        """`getattr(self, name)` (an array or a method returning one) as a tensor on `device`, cached."""
        key = (name, str(device), dtype)
        if key not in self._device_cache:
            value = getattr(self, name)
            value = value() if callable(value) else value
            self._device_cache[key] = to_device(value, device, dtype)
        return self._device_cache[key]


@dataclass(frozen=True)
class SlotTable:
    """Slot ids of positions ``[0, ends[i])`` of item i at ``flat[off[i]:off[i] + ends[i]]``; -1 = freed."""

    flat: np.ndarray
    off: np.ndarray

    @classmethod
    def from_lists(cls, per_item: list[np.ndarray]) -> "SlotTable":
        lens = np.array([len(s) for s in per_item], dtype=np.int64)
        off = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
        flat = np.concatenate(per_item).astype(np.int64) if per_item else np.zeros(0, np.int64)
        return cls(flat=flat, off=off)


@dataclass(frozen=True)
class Checkpoints:
    """Per item, the (position, destination state id) pairs at ``pos[off[i]:off[i] + count[i]]``, ascending."""

    pos: np.ndarray
    dst: np.ndarray
    off: np.ndarray
    count: np.ndarray

    @classmethod
    def from_lists(cls, per_item: list[list[tuple[int, int]]]) -> "Checkpoints":
        count = np.array([len(c) for c in per_item], dtype=np.int64)
        off = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
        pairs = [p for c in per_item for p in c]
        pos = np.array([p for p, _ in pairs], dtype=np.int64)
        dst = np.array([d for _, d in pairs], dtype=np.int64)
        return cls(pos=pos, dst=dst, off=off, count=count)

    def of(self, item: int) -> list[tuple[int, int]]:
        lo, hi = int(self.off[item]), int(self.off[item] + self.count[item])
        return [(int(p), int(d)) for p, d in zip(self.pos[lo:hi], self.dst[lo:hi], strict=True)]
