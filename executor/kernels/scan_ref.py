"""Plain-torch reference of `scan.ssm_scan`: the same recurrence, one token at a time."""

from __future__ import annotations

import torch

from executor.kernels.ragged import Checkpoints, Ragged


def ssm_scan_ref(
    x: torch.Tensor,
    dt: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    A: torch.Tensor,
    D: torch.Tensor,
    dt_bias: torch.Tensor,
    ssm_state: torch.Tensor,
    rag: Ragged,
    state_ids: list[int],
    ckpts: Checkpoints,
) -> torch.Tensor:
    _, H, P, N = ssm_state.shape
    y = torch.empty((rag.num_tokens, H * P), dtype=x.dtype, device=x.device)
    for i in range(rag.num_items):
        start, end, q_off = int(rag.starts[i]), int(rag.ends[i]), int(rag.q_off[i])
        state = ssm_state[state_ids[i]].clone() if start > 0 else ssm_state.new_zeros((H, P, N))
        ck = dict(ckpts.of(i))
        for pos in range(start, end):
            row = q_off + pos - start
            state, y_row = _step(
                state,
                x[row].float().view(H, P),
                dt[row].float(),
                B[row].float(),
                C[row].float(),
                A,
                D,
                dt_bias,
            )
            y[row] = y_row.reshape(-1).to(y.dtype)
            if pos + 1 in ck:
                ssm_state[ck[pos + 1]] = state
        ssm_state[state_ids[i]] = state
    return y


def _step(state, xv, dt, bv, cv, A, D, dt_bias):
    dt = dt + dt_bias.float()
    dt = torch.where(dt > 20.0, dt, torch.log(1.0 + torch.exp(dt)))
    state = state * torch.exp(dt * A.float())[:, None, None] + (dt[:, None] * xv)[:, :, None] * bv
    y = (state * cv).sum(-1) + D.float()[:, None] * xv
    return state, y
