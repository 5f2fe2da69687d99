"""Plain-torch reference of `attention.paged_attention`: one query position at a time.

Each query gathers exactly the keys it may see (a slot of -1 among them reads as NaN), so its shapes,
and hence its bits, depend only on its own position.
"""

from __future__ import annotations

import torch

from executor.kernels.attention import check_attention_args
from executor.kernels.ragged import Ragged, SlotTable


def paged_attention_ref(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    rag: Ragged,
    slots: SlotTable,
    window: int,
    sm_scale: float,
) -> torch.Tensor:
    check_attention_args(q, k_pool, v_pool, rag)
    out = torch.empty_like(q)
    group = q.shape[1] // k_pool.shape[1]
    for i in range(rag.num_items):
        start, end, q_off = int(rag.starts[i]), int(rag.ends[i]), int(rag.q_off[i])
        table = torch.as_tensor(slots.flat[slots.off[i] : slots.off[i] + end], device=q.device)
        keys, values = _gather(k_pool, table, group), _gather(v_pool, table, group)  # [Hq, end, D]
        for pos in range(start, end):
            lo = max(pos - window, 0) if window > 0 else 0
            row = q_off + pos - start
            scores = (keys[:, lo : pos + 1] * (q[row].float() * sm_scale)[:, None, :]).sum(-1)  # [Hq, L]
            # written out: torch.softmax opens an OpenMP region per call (~1 ms on a busy 2-core box)
            weights = torch.exp(scores - scores.amax(-1, keepdim=True))
            probs = weights / weights.sum(-1, keepdim=True)
            out[row] = (probs[:, :, None] * values[:, lo : pos + 1]).sum(1).to(out.dtype)
    return out


def _gather(pool: torch.Tensor, slots: torch.Tensor, group: int) -> torch.Tensor:
    """Rows of `slots` as [Hq, len, D] float32; a slot of -1 reads as NaN."""
    rows = pool[slots.clamp(min=0)].float()
    rows[slots < 0] = float("nan")
    return rows.repeat_interleave(group, dim=1).transpose(0, 1)
