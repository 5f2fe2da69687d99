"""The executor backend: runs each batch the engine schedules on the real model, for real.

It is handed the same ``Batch`` the simulator predicts, reads page and block tables and states from the
same cache manager (``executor/mirrors.py``), and poisons with NaN whatever the manager discards. It
returns the *predicted* step time to the engine, so the run's schedule (and therefore every cache decision)
is exactly the simulator's, and records the measured time beside it, with which requests each step served
(``executor/timeline.py`` lays the measured steps out per request).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from executor.bitwise import row_outputs
from executor.mirrors import BlockMirror, RadixMirror
from executor.model import HybridModel
from sim.cache.blocks.manager import BlockCacheManager
from sim.cost import CostModel, StepShape
from sim.run.backend import batch_shape


@dataclass(frozen=True)
class StepTiming:
    shape: StepShape
    predicted_s: float
    measured_s: float
    ends: tuple[tuple[str, int], ...] = ()  # (request id, plan end) of every item the step ran


class ExecutorBackend:
    predicts_only = False  # every step runs on the model: no fast path

    def __init__(self, model: HybridModel, cost: CostModel, kernels: str = "triton"):
        self.model, self.cost, self.kernels = model, cost, kernels
        self.mirror: RadixMirror | BlockMirror | None = None
        # request id -> output index -> (log-prob, logits fingerprint), see executor/bitwise.py
        self.outputs: dict[str, dict[int, tuple[float, int]]] = {}
        self.timings: list[StepTiming] = []
        self.timed = True  # False during a warm-up pass: nothing is recorded
        # requests resuming from a state computed in the same step (run after the rest of it, see mirrors.py)
        self.same_step_state_hits = 0

    @property
    def pools(self):
        return None if self.mirror is None else self.mirror.pools

    def attach(self, manager) -> None:
        """Build real pools the size of the manager's and poison whatever it discards."""
        shared = isinstance(manager, BlockCacheManager)  # vLLM's one block pool, else the radix pools
        self.mirror = (BlockMirror if shared else RadixMirror)(manager, self.model)

    def run(self, batch, manager) -> float:
        assert self.mirror is not None, "attach() first"

        def tokens_of(plan):
            ids = manager.requests[plan.request_id].tokens.token_ids(plan.start, plan.end)
            return self.model.map_token_ids(ids).numpy()

        items, deferred = self.mirror.items(batch.items, manager, tokens_of)
        shape = batch_shape(batch)
        predicted = self.cost.step_time(shape)
        with _Stopwatch(self.model.device) as watch:
            logits = self._forward(items, deferred)
        if self.timed:
            ends = tuple((entry.plan.request_id, entry.plan.end) for entry in batch.items)
            self.timings.append(StepTiming(shape, predicted, watch.seconds, ends))
            self._record_outputs(batch.items, logits, manager)
        return predicted

    def _forward(self, items: list, deferred: dict[int, list]) -> list[torch.Tensor]:
        """One forward, or two where an item resumes from a state another item computes in this step: the
        others first, then the copies, then those items (each row's bits do not depend on its batch)."""
        logits: list = [None] * len(items)
        phases = [[i for i in range(len(items)) if i not in deferred], sorted(deferred)]
        for phase, indices in enumerate(phases):
            if not indices:
                continue
            for src, dst, group in (copy for i in indices if phase for copy in deferred[i]):
                self.pools.copy_state(src, dst, group)
            outs = self.model.forward([items[i] for i in indices], self.pools, self.kernels)
            for i, out in zip(indices, outs, strict=True):
                logits[i] = out
        self.same_step_state_hits += len(deferred) if self.timed else 0
        return logits

    def decode_times(self, contexts: tuple[int, ...]):
        raise NotImplementedError("the executor runs every step on the model: run it with fast_path=False")

    def decode_run(self, contexts: tuple[int, ...], now: float, horizon: float, max_steps: int):
        raise NotImplementedError("the executor runs every step on the model: run it with fast_path=False")

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
