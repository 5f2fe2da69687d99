"""The executor's memory as a mirror of the cache manager's: pools sized like the manager's, poisoned where it
discards, and each scheduled item's forward inputs read from the manager's own page and block tables.

* ``RadixMirror``: the radix manager (SGLang, FreeToken, Marconi): separate FULL / SWA / MAMBA pools; a
  request's running state and checkpoints are the plan's state ids; a resumed request's first chunk copies
  the tree's state into its running one.
* ``BlockMirror``: vLLM's block manager: one tensor pool per KV cache group, all addressed by the shared
  pool's block ids. A Mamba group's running state lives in the block at index ``(end - 1) // B`` of the
  request's table; when a step moves it to a new block, the state is copied there first (vLLM's align
  mode), so the block it leaves keeps the state at its boundary, the one vLLM hashes. A step that exports
  an internal prefill checkpoint has a block at index ``(end - 1) // B - 1`` newly in its table: the state
  at that boundary is written there. A request admitted with a hit on a state that another request of the
  same step computes (vLLM guards against such a hit; the simulator does not model the guard) is run after
  the rest of the step, its copy deferred until that state exists: ``items`` returns those copies by item.
"""

from __future__ import annotations

import numpy as np

from executor.batch import ForwardItem, kind_item
from executor.layout import by_blocks
from executor.pools import Pools
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.events import BlocksDiscarded, SlotsFreed


def page_slots(pages: list[int | None], page_size: int, end: int) -> np.ndarray:
    """Slot ids of positions [0, end) from page ids (None or -1 pages give -1 slots: freed)."""
    pages_arr = np.asarray([-1 if p is None else p for p in pages], dtype=np.int64)
    slots = pages_arr[:, None] * page_size + np.arange(page_size)
    slots[pages_arr < 0] = -1
    return slots.reshape(-1)[:end]


class RadixMirror:
    def __init__(self, manager, model):
        sizes = {comp: pool.size for comp, pool in manager.pools.items()}
        self.pools = Pools.by_kind(
            model.spec,
            manager.page_size,
            sizes[FULL],
            sizes[SWA],
            sizes[MAMBA],
            device=model.device,
            dtype=model.dtype,
        )
        poison = {
            FULL: self.pools.poison_full_pages,
            SWA: self.pools.poison_swa_pages,
            MAMBA: self.pools.poison_states,
        }
        manager.events.subscribe(SlotsFreed, lambda event: poison[event.component](event.ids))

    def items(self, entries, manager, tokens_of) -> tuple[list[ForwardItem], dict]:
        return [self._item(entry, manager, tokens_of(entry.plan)) for entry in entries], {}

    def _item(self, entry, manager, tokens: np.ndarray) -> ForwardItem:
        plan = entry.plan
        if entry.copy_state_from is not None:
            self.pools.copy_state(entry.copy_state_from, plan.state_id)
        full_pages, swa_pages = manager.page_tables(plan.request_id)
        full = page_slots(full_pages, manager.page_size, plan.end)
        swa = page_slots(swa_pages, manager.page_size, plan.end)
        state = plan.state_id if plan.state_id is not None else 0
        return kind_item(tokens, plan.start, full, swa, state, plan.checkpoints, plan.end - 1)


class BlockMirror:
    def __init__(self, manager, model):
        blocks = manager.layout
        kind_blocks = {kind: blocks.block_of(kind) for kind in blocks.kinds}
        layout = by_blocks(
            model.spec, manager.page_size, blocks.group_kinds, manager.pool.num_blocks, kind_blocks
        )
        self.pools = Pools(model.spec, layout, device=model.device, dtype=model.dtype)
        manager.events.subscribe(BlocksDiscarded, lambda event: self.pools.poison(event.group, event.blocks))

    def items(self, entries, manager, tokens_of) -> tuple[list[ForwardItem], dict[int, list]]:
        """The step's items, and per item index the state copies to make only after the other items ran."""
        plans = [entry.plan for entry in entries]
        written = {(g, block) for plan in plans for g, block in self._state_writes(manager, plan)}
        items, deferred = [], {}
        for index, plan in enumerate(plans):
            copies: list[tuple[int, int, int]] = []
            items.append(self._item(plan, manager, tokens_of(plan), written, copies))
            if copies:
                deferred[index] = copies
        return items, deferred

    def _state_writes(self, manager, plan):
        """(group, block) of every state block the step writes: the running one and a checkpoint."""
        B, table_of = manager.page_size, manager.requests[plan.request_id].tables
        for g in self.pools.layout.state_groups:
            yield g, table_of[g][(plan.end - 1) // B]
            checkpoint = self._checkpoint_index(table_of[g], plan.start, plan.end, B)
            if checkpoint is not None:
                yield g, table_of[g][checkpoint]

    @staticmethod
    def _checkpoint_index(table: list, start: int, end: int, B: int) -> int | None:
        index = (end - 1) // B - 1
        return index if index > (start - 1) // B and table[index] is not None else None

    def _item(self, plan, manager, tokens: np.ndarray, written: set, copies: list) -> ForwardItem:
        B, req = manager.page_size, manager.requests[plan.request_id]
        layout = self.pools.layout
        slots = {g: page_slots(req.tables[g], layout.page_of(g), plan.end) for g in layout.attention_groups}
        states: dict[int, int] = {}  # state group -> its running state block
        checkpoints: dict[int, dict[int, int]] = {}  # position -> {state group: block saved there}
        for g in layout.state_groups:
            table = req.tables[g]
            states[g] = self._running_state(g, table, plan, B, written, copies)
            index = self._checkpoint_index(table, plan.start, plan.end, B)
            if index is not None:
                checkpoints.setdefault((index + 1) * B, {})[g] = table[index]
        return ForwardItem(
            tokens, plan.start, slots, states, tuple(sorted(checkpoints.items())), plan.end - 1
        )

    def _running_state(self, g: int, table: list, plan, B: int, written: set, copies: list) -> int:
        dst = table[(plan.end - 1) // B]
        if dst is None:
            raise RuntimeError(
                f"{plan.request_id}: no running state block at {(plan.end - 1) // B} (group {g})"
            )
        src = table[(plan.start - 1) // B] if plan.start else None
        if plan.start and src is None:  # the state it resumes from was never there: it reads poison
            self.pools.poison(g, [dst])
        elif src is not None and src != dst:
            if (g, src) in written:
                copies.append((src, dst, g))
            else:
                self.pools.copy_state(src, dst, g)
        return dst
