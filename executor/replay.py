"""Each request replayed from scratch with the cache off: the reference outputs of the bitwise check."""

from __future__ import annotations

import numpy as np
import torch

from executor.batch import kind_item
from executor.bitwise import Outputs, row_outputs
from executor.model import HybridModel
from executor.pools import Pools
from sim.align import ceil_div
from sim.trace import Trace


def replay_outputs(
    model: HybridModel,
    trace: Trace,
    request_ids: list[str],
    kernels: str,
    page_size: int = 16,
    window_offset: int = 0,
) -> dict[str, Outputs]:
    """Every output position's log-prob and logits fingerprint, the whole sequence in one pass from 0, with
    the run's SWA window convention (``MemoryLayout.window_offset``)."""
    lengths = {rid: trace.prompt_len(rid) + trace.request(rid).output_len - 1 for rid in request_ids}
    pages = ceil_div(max(lengths.values(), default=1), page_size)
    pools = Pools.by_kind(model.spec, page_size, pages, pages, 1, model.device, model.dtype, window_offset)
    out = {}
    for rid in request_ids:
        prompt_len, length = trace.prompt_len(rid), lengths[rid]
        ids = model.map_token_ids(trace.request_seq(rid).token_ids(0, length + 1)).numpy()
        slots = np.arange(length)
        item = kind_item(ids[:length], 0, slots, slots, 0, (), prompt_len - 1)
        logits = model.forward([item], pools, kernels)[0]
        targets = torch.as_tensor(ids[prompt_len : length + 1], device=logits.device)
        out[rid] = row_outputs(logits, targets)
    return out
