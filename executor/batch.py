"""One forward step: a list of items (`ForwardItem`), one per request, each a prefill chunk or a decode step.

Item fields (positions are absolute in the request's sequence):
- `token_ids`: vocab ids of positions ``[start, end)``;
- `start`: positions ``[0, start)`` are already in the KV pools and in the running MAMBA state;
- `full_slots` / `swa_slots`: slot ids of positions ``[0, end)`` (-1 in `swa_slots` where the policy freed
  SWA KV; a correct policy frees only positions no SWA layer reads again);
- `state_id`: the running MAMBA state (the state after position `start`, updated in place; ignored and
  treated as zeros when `start == 0`);
- `checkpoints`: ``(pos, dst_state_id)`` with ``start < pos <= end``: copy the state after the first `pos`
  tokens to `dst_state_id`;
- `logits_from`: logits are returned for positions ``[logits_from, end)`` (default: the last position).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from executor.kernels.ragged import Checkpoints, Ragged, SlotTable
from sim.models import FULL, MAMBA, SWA


def _ids(values, what: str) -> np.ndarray:
    arr = np.asarray(values.cpu() if hasattr(values, "cpu") else values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64).reshape(-1)


@dataclass(frozen=True)
class ForwardItem:
    token_ids: np.ndarray
    start: int
    full_slots: np.ndarray
    swa_slots: np.ndarray
    state_id: int = 0
    checkpoints: tuple[tuple[int, int], ...] = ()
    logits_from: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "token_ids", _ids(self.token_ids, "token_ids"))
        set_(self, "full_slots", _ids(self.full_slots, "full_slots"))
        set_(self, "swa_slots", _ids(self.swa_slots, "swa_slots"))
        set_(self, "checkpoints", tuple((int(p), int(d)) for p, d in self.checkpoints))
        if self.logits_from is None:
            set_(self, "logits_from", self.end - 1)
        self._validate()

    @property
    def end(self) -> int:
        return int(self.start) + len(self.token_ids)

    def _validate(self) -> None:
        if len(self.token_ids) == 0 or self.start < 0:
            raise ValueError(
                f"ForwardItem: need start >= 0 and at least one token, got start={self.start}, "
                f"{len(self.token_ids)} tokens"
            )
        positions = [p for p, _ in self.checkpoints]
        if positions != sorted(set(positions)) or any(not self.start < p <= self.end for p in positions):
            raise ValueError(
                f"ForwardItem: checkpoint positions {positions} must be increasing, in "
                f"({self.start}, {self.end}]"
            )
        if any(d == self.state_id for _, d in self.checkpoints):
            raise ValueError(f"ForwardItem: a checkpoint targets the running state {self.state_id}")
        if not self.start <= self.logits_from <= self.end:
            raise ValueError(
                f"ForwardItem: logits_from={self.logits_from} outside [{self.start}, {self.end}]"
            )


@dataclass(frozen=True)
class ForwardBatch:
    items: list[ForwardItem]
    rag: Ragged = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("ForwardBatch: no items")
        starts = np.array([it.start for it in self.items], dtype=np.int64)
        ends = np.array([it.end for it in self.items], dtype=np.int64)
        object.__setattr__(self, "rag", Ragged(starts, ends))

    def token_ids(self) -> np.ndarray:
        return np.concatenate([it.token_ids for it in self.items])

    def state_ids(self) -> list[int]:
        return [int(it.state_id) for it in self.items]

    def checkpoints(self) -> Checkpoints:
        return Checkpoints.from_lists([list(it.checkpoints) for it in self.items])

    def slot_table(self, kind: str) -> SlotTable:
        """FULL (kind 'full') or SWA ('swa') slot ids of positions [0, end) of every item."""
        return SlotTable.from_lists([it.full_slots if kind == FULL else it.swa_slots for it in self.items])

    def logit_rows(self) -> list[np.ndarray]:
        """Packed rows whose logits each item returns."""
        q_off = self.rag.q_off
        return [np.arange(it.logits_from, it.end) - it.start + q_off[i] for i, it in enumerate(self.items)]

    def check_fits(self, pools) -> None:
        """Every id names memory that `pools` has; raise naming the item and field otherwise."""
        kinds = set(pools.spec.layer_kinds)
        for i, it in enumerate(self.items):
            for kind, slots in ((FULL, it.full_slots), (SWA, it.swa_slots)):
                if kind in kinds:
                    _check_slots(i, kind, slots, it, pools.num_slots(kind))
            if MAMBA in kinds:
                for what, sid in [("state_id", it.state_id)] + [("checkpoint", d) for _, d in it.checkpoints]:
                    if not 0 <= sid < pools.num_states:
                        raise ValueError(f"item {i}: {what} {sid} out of range [0, {pools.num_states})")


def _check_slots(i: int, kind: str, slots: np.ndarray, it: ForwardItem, num_slots: int) -> None:
    if len(slots) != it.end:
        raise ValueError(
            f"item {i}: {kind}_slots has {len(slots)} entries, need {it.end} (positions [0, end))"
        )
    low = -1 if kind == SWA else 0  # only SWA KV may be freed below the window
    bad = np.flatnonzero((slots < low) | (slots >= num_slots))
    if bad.size:
        raise ValueError(
            f"item {i}: {kind}_slots[{bad[0]}] = {slots[bad[0]]} out of range [{low}, {num_slots})"
        )
    new = slots[it.start :]
    if (new < 0).any():
        raise ValueError(f"item {i}: {kind}_slots of the new positions [{it.start}, {it.end}) must be >= 0")
