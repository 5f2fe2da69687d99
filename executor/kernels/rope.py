"""Rotary position embedding (rotate-half form) from a table computed in fixed blocks of positions.

A position's cos/sin must be the same bits whatever else is in the batch, and torch's elementwise cos
rounds a vector body and a scalar tail differently. So the table is built in blocks of BLOCK positions,
each block always by the same call on the same values (in float64, then rounded once), and looked up by
position; the rotation itself is only multiplies and adds, which round the same anywhere.
"""

from __future__ import annotations

import torch

BLOCK = 1024


class RopeTable:
    def __init__(self, head_dim: int, theta: float = 10000.0):
        if head_dim % 2:
            raise ValueError(f"rope: head_dim must be even, got {head_dim}")
        self.head_dim = head_dim
        self._inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self._blocks: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._tables: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def _grow(self, num_positions: int) -> None:
        while len(self._blocks) * BLOCK < num_positions:
            first = len(self._blocks) * BLOCK
            angles = (
                torch.arange(first, first + BLOCK, dtype=torch.float64)[:, None] * self._inv_freq[None, :]
            )
            self._blocks.append((torch.cos(angles).float(), torch.sin(angles).float()))
        self._tables.clear()

    def lookup(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, head_dim/2] (float32) for integer positions [T] on positions' device."""
        top = int(positions.max()) + 1 if positions.numel() else 0
        if top > len(self._blocks) * BLOCK:
            self._grow(top)
        key = str(positions.device)
        if key not in self._tables:
            cos = (
                torch.cat([c for c, _ in self._blocks])
                if self._blocks
                else torch.zeros(0, self.head_dim // 2)
            )
            sin = (
                torch.cat([s for _, s in self._blocks])
                if self._blocks
                else torch.zeros(0, self.head_dim // 2)
            )
            self._tables[key] = (cos.to(positions.device), sin.to(positions.device))
        cos, sin = self._tables[key]
        return cos[positions], sin[positions]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, H, D] rotated by per-token cos/sin [T, D/2]; computed in float32, returned in x's dtype."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)
