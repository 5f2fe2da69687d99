"""Helpers for the executor tests: the tiny model, pools, and sequences laid out on random pages."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from executor.batch import ForwardItem, kind_item
from executor.pools import Pools
from sim.models import get_model

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # Triton kernels: real GPU, else interpreted
SPEC = get_model("tiny")
PAGE = 8
NUM_PAGES = 96
NUM_STATES = 8


def make_pools(device: str = DEVICE, page_size: int = PAGE) -> Pools:
    return Pools.by_kind(SPEC, page_size, NUM_PAGES, NUM_PAGES, NUM_STATES, device=device)


class PageAlloc:
    """Hands out distinct pages in a shuffled order, so slot tables are never contiguous."""

    def __init__(self, seed: int, num_pages: int = NUM_PAGES):
        self._free = list(np.random.default_rng(seed).permutation(num_pages))

    def take(self, count: int) -> np.ndarray:
        if count > len(self._free):
            raise RuntimeError("test pools too small")
        taken, self._free = self._free[:count], self._free[count:]
        return np.array(taken, dtype=np.int64)


@dataclass
class Seq:
    """One request's tokens (vocab ids) and the pages its FULL and SWA KV live on."""

    token_ids: np.ndarray
    full_pages: np.ndarray
    swa_pages: np.ndarray
    page_size: int = PAGE

    def slots(self, pages: np.ndarray, end: int) -> np.ndarray:
        return (pages[:, None] * self.page_size + np.arange(self.page_size)).reshape(-1)[:end]

    def item(self, start: int, end: int, state_id: int = 0, checkpoints=(), logits_from: int | None = None,
             swa_freed: tuple[int, int] | None = None) -> ForwardItem:
        """Positions [start, end); `swa_freed` = (lo, hi) positions whose SWA slots read -1."""
        swa = self.slots(self.swa_pages, end).copy()
        if swa_freed is not None:
            swa[swa_freed[0]:swa_freed[1]] = -1
        return kind_item(self.token_ids[start:end], start, self.slots(self.full_pages, end), swa, state_id,
                         tuple(checkpoints), start if logits_from is None else logits_from)


def make_seq(model, length: int, seed: int, alloc: PageAlloc, page_size: int = PAGE) -> Seq:
    raw = np.random.default_rng(seed).integers(0, 2**63 - 1, size=length, dtype=np.int64)
    pages = -(-length // page_size)
    return Seq(model.map_token_ids(raw).numpy(), alloc.take(pages), alloc.take(pages), page_size)


def run_chunks(model, seq: Seq, pools: Pools, bounds: list[int], kernels: str, state_id: int = 0):
    """Feed seq in chunks [bounds[i], bounds[i+1]); returns the logits of every position, concatenated."""
    out = [model.forward([seq.item(lo, hi, state_id)], pools, kernels)[0]
           for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    return torch.cat(out)
