"""One forward step: a list of items (`ForwardItem`), one per request, each a prefill chunk or a decode step.

Item fields (positions are absolute in the request's sequence; groups are the pools' ``MemoryLayout``'s):
- `token_ids`: vocab ids of positions ``[start, end)``;
- `start`: positions ``[0, start)`` are already in the KV pools and in the running states;
- `slots`: per attention group, the slot ids of positions ``[0, end)`` (-1 in a SWA group where the policy
  freed the KV; a correct policy frees only positions no SWA layer reads again);
- `states`: per state group, the running state (the state after position `start`, updated in place;
  ignored and treated as zeros when `start == 0`);
- `checkpoints`: ``(pos, {group: dst_state_id})`` with ``start < pos <= end``: copy the state after the first
  `pos` tokens to `dst_state_id` in each group;
- `logits_from`: logits are returned for positions ``[logits_from, end)`` (default: the last position).

`kind_item` builds an item for the radix layout (groups FULL, SWA, MAMBA = 0, 1, 2). Prefill chunks and
decode steps mix freely in a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from executor.kernels.ragged import Checkpoints, Ragged, SlotTable
from sim.models import SWA

Slots = Mapping[int, np.ndarray]
States = Mapping[int, int]


def _ids(values, what: str) -> np.ndarray:
    arr = np.asarray(values.cpu() if hasattr(values, "cpu") else values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64).reshape(-1)


@dataclass(frozen=True)
class ForwardItem:
    token_ids: np.ndarray
    start: int
    slots: Slots
    states: States = field(default_factory=dict)
    checkpoints: tuple[tuple[int, States], ...] = ()
    logits_from: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "token_ids", _ids(self.token_ids, "token_ids"))
        set_(self, "slots", {int(g): _ids(s, f"slots[{g}]") for g, s in self.slots.items()})
        set_(self, "states", {int(g): int(s) for g, s in self.states.items()})
        set_(
            self,
            "checkpoints",
            tuple((int(p), {int(g): int(d) for g, d in m.items()}) for p, m in self.checkpoints),
        )
        logits_from = self.end - 1 if self.logits_from is None else self.logits_from
        set_(self, "logits_from", logits_from)
        self._validate(logits_from)

    @property
    def end(self) -> int:
        return int(self.start) + len(self.token_ids)

    def _validate(self, logits_from: int) -> None:
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
        for _, dsts in self.checkpoints:
            for group, dst in dsts.items():
                if dst == self.states.get(group):
                    raise ValueError(
                        f"ForwardItem: a checkpoint targets the running state {dst} (group {group})"
                    )
        if not self.start <= logits_from <= self.end:
            raise ValueError(f"ForwardItem: logits_from={logits_from} outside [{self.start}, {self.end}]")


def kind_item(
    token_ids,
    start: int,
    full_slots,
    swa_slots,
    state_id: int = 0,
    checkpoints=(),
    logits_from: int | None = None,
) -> ForwardItem:
    """An item for the radix layout: FULL slots, SWA slots, one running state and its checkpoints."""
    return ForwardItem(
        token_ids,
        start,
        {0: full_slots, 1: swa_slots},
        {2: state_id},
        tuple((pos, {2: dst}) for pos, dst in checkpoints),
        logits_from,
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

    def state_ids(self, group: int) -> list[int]:
        return [int(it.states.get(group, 0)) for it in self.items]

    def checkpoints(self, group: int) -> Checkpoints:
        return Checkpoints.from_lists(
            [[(p, dsts[group]) for p, dsts in it.checkpoints if group in dsts] for it in self.items]
        )

    def slot_table(self, group: int) -> SlotTable:
        """Slot ids of positions [0, end) of every item in an attention group."""
        return SlotTable.from_lists([it.slots[group] for it in self.items])

    def logit_rows(self) -> list[np.ndarray]:
        """Packed rows whose logits each item returns."""
        q_off = self.rag.q_off
        return [np.arange(it.logits_from, it.end) - it.start + q_off[i] for i, it in enumerate(self.items)]

    def check_fits(self, pools) -> None:
        """Every id names memory that `pools` has; raise naming the item, group and field otherwise."""
        layout = pools.layout
        for i, it in enumerate(self.items):
            for g in layout.attention_groups:
                group = layout.groups[g]
                if group.layers:
                    if g not in it.slots:
                        raise ValueError(f"item {i}: no slots for {group.kind} group {g}")
                    _check_slots(i, g, group.kind, it.slots[g], it, pools.num_slots(g))
            for g in layout.state_groups:
                if layout.groups[g].layers:
                    wanted = [("state", it.states.get(g, 0))]
                    wanted += [("checkpoint", dsts.get(g, 0)) for _, dsts in it.checkpoints]
                    for what, sid in wanted:
                        if not 0 <= sid < pools.num_ids(g):
                            raise ValueError(
                                f"item {i}: {what} {sid} of state group {g} out of range [0, {pools.num_ids(g)})"
                            )


def _check_slots(i: int, g: int, kind: str, slots: np.ndarray, it: ForwardItem, num_slots: int) -> None:
    name = f"{kind} group {g} slots"
    if len(slots) != it.end:
        raise ValueError(f"item {i}: {name} has {len(slots)} entries, need {it.end} (positions [0, end))")
    low = -1 if kind == SWA else 0  # only SWA KV may be freed below the window
    bad = np.flatnonzero((slots < low) | (slots >= num_slots))
    if bad.size:
        raise ValueError(f"item {i}: {name}[{bad[0]}] = {slots[bad[0]]} out of range [{low}, {num_slots})")
    if (slots[it.start :] < 0).any():
        raise ValueError(f"item {i}: {name} of the new positions [{it.start}, {it.end}) must be >= 0")
