"""Plain-torch reference of `scan.ssm_scan`: the same recurrence (Mamba2 or GatedDeltaNet), one token at a
time."""

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
    beta: torch.Tensor | None = None,
) -> torch.Tensor:
    _, H, P, N = ssm_state.shape
    groups = B.shape[1] // N
    y = torch.empty((rag.num_tokens, H * P), dtype=x.dtype, device=x.device)
    for i in range(rag.num_items):
        start, end, q_off = int(rag.starts[i]), int(rag.ends[i]), int(rag.q_off[i])
        state = ssm_state[state_ids[i]].clone() if start > 0 else ssm_state.new_zeros((H, P, N))
        ck = dict(ckpts.of(i))
        for pos in range(start, end):
            row = q_off + pos - start
            heads = torch.arange(H, device=x.device) // (H // groups)
            inputs = (
                x[row].float().view(H, P),
                dt[row].float() + dt_bias.float(),
                B[row].float().view(groups, N)[heads],
                C[row].float().view(groups, N)[heads],
            )
            if beta is None:
                state, y_row = _mamba2_step(state, *inputs, A, D)
            else:
                state, y_row = _gdn_step(state, *inputs, A, beta[row].float())
            y[row] = y_row.reshape(-1).to(y.dtype)
            if pos + 1 in ck:
                ssm_state[ck[pos + 1]] = state
        ssm_state[state_ids[i]] = state
    return y


def _softplus(dt: torch.Tensor) -> torch.Tensor:
    return torch.where(dt > 20.0, dt, torch.log(1.0 + torch.exp(dt)))


def _mamba2_step(state, xv, dt, bv, cv, A, D):
    dt = _softplus(dt)
    state = state * torch.exp(dt * A.float())[:, None, None] + (dt[:, None] * xv)[:, :, None] * bv[:, None, :]
    y = (state * cv[:, None, :]).sum(-1) + D.float()[:, None] * xv
    return state, y


def _gdn_step(state, xv, dt, kv, qv, A, beta_raw):
    dt = _softplus(dt)
    kv = kv / torch.sqrt((kv * kv).sum(-1) + 1e-6)[:, None]
    qv = qv / torch.sqrt((qv * qv).sum(-1) + 1e-6)[:, None]
    beta = 1.0 / (1.0 + torch.exp(-beta_raw))
    state = state * torch.exp(dt * A.float())[:, None, None]
    delta = beta[:, None] * (xv - (state * kv[:, None, :]).sum(-1))
    state = state + delta[:, :, None] * kv[:, None, :]
    return state, (state * qv[:, None, :]).sum(-1)
