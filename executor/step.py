"""Per-forward inputs every layer shares: token ids, RoPE rows per head size, and per memory group the
slot tables (attention) or the running states and checkpoints (state groups)."""

from __future__ import annotations

import numpy as np
import torch

from executor.batch import ForwardBatch
from executor.kernels.ragged import Ragged, SlotTable
from executor.kernels.rope import RopeTable


class Step:
    def __init__(self, batch: ForwardBatch, layout, ropes: dict[int, RopeTable], device: torch.device):
        self.rag = batch.rag
        self.token_ids = torch.as_tensor(batch.token_ids(), device=device)
        positions = torch.as_tensor(self.rag.positions(), device=device)
        self.rope = {head_dim: table.lookup(positions) for head_dim, table in ropes.items()}
        self.slots: dict[int, SlotTable] = {}
        self.new_slots: dict[int, torch.Tensor] = {}
        for g in layout.attention_groups:
            if layout.groups[g].layers:
                self.slots[g] = batch.slot_table(g)
                self.new_slots[g] = torch.as_tensor(_new_positions(self.slots[g], self.rag), device=device)
        self.state_ids = {g: batch.state_ids(g) for g in layout.state_groups}
        self.ckpts = {g: batch.checkpoints(g) for g in layout.state_groups}


def _new_positions(table: SlotTable, rag: Ragged) -> np.ndarray:
    """Slots of every item's new positions [start, end), in packed token order."""
    parts = [table.flat[o + s : o + e] for o, s, e in zip(table.off, rag.starts, rag.ends, strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
