"""The executor backend: runs each batch the engine schedules on the real model, for real.

It is handed the same ``Batch`` the simulator predicts, reads page tables and states from the same cache
manager, and poisons with NaN every page and state the manager frees. It returns the *predicted* step
time to the engine, so the run's schedule (and therefore every cache decision) is exactly the
simulator's, and records the measured time beside it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from executor.batch import ForwardItem
from executor.bitwise import row_outputs
from executor.model import HybridModel
from executor.pools import Pools
from sim.cache.components import FULL, MAMBA, SWA
from sim.cost import CostModel, StepShape
from sim.run.backend import batch_shape


@dataclass(frozen=True)
class StepTiming:
    shape: StepShape
    predicted_s: float
    measured_s: float


class ExecutorBackend:
    predicts_only = False  # every step runs on the model: no fast path

    def __init__(self, model: HybridModel, cost: CostModel, kernels: str = "triton"):
        self.model, self.cost, self.kernels = model, cost, kernels
        self.pools: Pools | None = None
        # request id -> output index -> (log-prob, logits fingerprint), see executor/bitwise.py
        self.outputs: dict[str, dict[int, tuple[float, int]]] = {}
        self.timings: list[StepTiming] = []

    def attach(self, manager) -> None:
        """Build real pools the size of the manager's and poison whatever it frees."""
        sizes = {comp: pool.size for comp, pool in manager.pools.items()}
        self.pools = Pools(
            self.model.spec,
            manager.page_size,
            sizes[FULL],
            sizes[SWA],
            sizes[MAMBA],
            device=self.model.device,
            dtype=self.model.dtype,
        )
        manager.pools[FULL].set_on_free(self.pools.poison_full_pages)
        manager.pools[SWA].set_on_free(self.pools.poison_swa_pages)
        manager.pools[MAMBA].set_on_free(self.pools.poison_states)

    def run(self, batch, manager) -> float:
        items = [self._item(entry, manager) for entry in batch.items]
        shape = batch_shape(batch)
        predicted = self.cost.step_time(shape)
        with _Stopwatch(self.model.device) as watch:
            logits = self.model.forward(items, self.pools, self.kernels)
        measured = watch.seconds
        self.timings.append(StepTiming(shape, predicted, measured))
        self._record_outputs(batch.items, logits, manager)
        return predicted

    def decode_times(self, contexts: tuple[int, ...]):
        raise NotImplementedError("the executor runs every step on the model: run it with fast_path=False")

    def _item(self, entry, manager) -> ForwardItem:
        plan = entry.plan
        req = manager.requests[plan.request_id]
        if entry.copy_state_from is not None:
            self.pools.copy_state(entry.copy_state_from, plan.state_id)
        full_pages, swa_pages = manager.page_tables(plan.request_id)
        page = manager.page_size
        full = page_slots(full_pages, page, plan.end)
        swa = page_slots([-1 if p is None else p for p in swa_pages], page, plan.end)
        tokens = self.model.map_token_ids(req.tokens.token_ids(plan.start, plan.end))
        state = plan.state_id if plan.state_id is not None else 0
        return ForwardItem(tokens.numpy(), plan.start, full, swa, state, plan.checkpoints, plan.end - 1)

    def _record_outputs(self, entries, logits: list[torch.Tensor], manager) -> None:
        """The output each item's last position predicts (teacher-forced from the trace), if it is one."""
        rows, targets, keys = [], [], []
        for entry, item_logits in zip(entries, logits, strict=True):
            plan = entry.plan
            req = manager.requests[plan.request_id]
            index = plan.end - req.prompt_len
            if 0 <= index < len(req.tokens) - req.prompt_len:
                rows.append(item_logits[-1])
                targets.append(int(self.model.map_token_ids(req.tokens.token_ids(plan.end, plan.end + 1))[0]))
                keys.append((plan.request_id, index))
        if not rows:
            return
        found = row_outputs(torch.stack(rows), torch.as_tensor(targets, device=rows[0].device))
        for (request_id, index), logprob, fingerprint in zip(keys, *found, strict=True):
            self.outputs.setdefault(request_id, {})[index] = (float(logprob), int(fingerprint))


def page_slots(pages: list[int], page_size: int, end: int) -> np.ndarray:
    """Slot ids of positions [0, end) from page ids (-1 pages give -1 slots: freed SWA)."""
    pages_arr = np.asarray(pages, dtype=np.int64)
    slots = pages_arr[:, None] * page_size + np.arange(page_size)
    slots[pages_arr < 0] = -1
    return slots.reshape(-1)[:end]


class _Stopwatch:
    """Wall time of a forward: CUDA events on a GPU (the queue is drained first), perf_counter on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.seconds = 0.0

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            self.seconds = self.start.elapsed_time(self.end) / 1000.0
        else:
            self.seconds = time.perf_counter() - self.started
