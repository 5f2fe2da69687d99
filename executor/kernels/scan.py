"""The MAMBA recurrence (Mamba2's SSD, or GatedDeltaNet's delta rule), resuming from a state slot and
writing checkpoints.

Per head h (of group g = h // (H / G): B and C come in G groups shared by H / G heads each) and token t,
with dt = softplus(dt_raw + dt_bias) and A < 0, the state is ``[P, N]`` in fp32:

    mamba2:  state = exp(dt * A) * state + dt * outer(x, B);          y = state @ C + D * x
    gdn:     k, q = B, C L2-normalised; beta = sigmoid(beta_raw)
             state = exp(dt * A) * state;  state += beta * outer(x - state @ k, k);   y = state @ q

(GatedDeltaNet in the layout of Mamba2: v is x, k is B, q is C.) One program walks one item's tokens in
order, so the state after a token is the same value whether the item came as one chunk, many chunks or
single decode steps (the state is stored and reloaded in fp32, exactly). Checkpoints are taken at absolute
positions: after the first `pos` tokens of the sequence, the state is copied to the checkpoint's slot.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from executor.kernels import config
from executor.kernels.ragged import Checkpoints, Ragged, to_device
from executor.kernels.reductions import SUM


@triton.jit
def ssm_scan_kernel(
    x_ptr,
    dt_ptr,
    b_ptr,
    c_ptr,
    y_ptr,
    a_ptr,
    d_ptr,
    dtb_ptr,
    beta_ptr,
    st_ptr,
    q_off_ptr,
    start_ptr,
    end_ptr,
    sid_ptr,
    ck_off_ptr,
    ck_cnt_ptr,
    ck_pos_ptr,
    ck_dst_ptr,
    H,
    P,
    N,
    heads_per_group,
    s_xt,
    s_dtt,
    s_bt,
    s_ct,
    s_yt,
    s_betat,
    s_ss,
    BLOCK_H: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GDN: tl.constexpr,
):
    item = tl.program_id(0)
    r = tl.arange(0, BLOCK_H * BLOCK_P)  # one state row per (head, head-dim) pair
    h = tl.program_id(1) * BLOCK_H + r // BLOCK_P
    p = r % BLOCK_P
    r_ok = (h < H) & (p < P)
    n = tl.arange(0, BLOCK_N)
    n_ok = n < N
    bc_col = (h // heads_per_group)[:, None] * N + n[None, :]  # each row's B/C group
    bc_ok = r_ok[:, None] & n_ok[None, :]
    st_off = (h * P + p)[:, None] * N + n[None, :]
    st_ok = r_ok[:, None] & n_ok[None, :]
    x_col = h * P + p
    q_off, start, end = tl.load(q_off_ptr + item), tl.load(start_ptr + item), tl.load(end_ptr + item)
    st_run = st_ptr + tl.load(sid_ptr + item).to(tl.int64) * s_ss + st_off
    # start == 0: the slot is not this sequence's state yet (it may hold NaN poison); start from zeros
    state = tl.load(st_run, mask=st_ok & (start > 0), other=0.0)
    a = tl.load(a_ptr + h, mask=r_ok, other=0.0)
    dd = tl.load(d_ptr + h, mask=r_ok, other=0.0)
    dtb = tl.load(dtb_ptr + h, mask=r_ok, other=0.0)
    ck_off, ck_cnt = tl.load(ck_off_ptr + item), tl.load(ck_cnt_ptr + item)
    # pointers walk the item's rows; the interpreter pays per op, so the loop body is kept minimal
    q0 = q_off.to(tl.int64)
    x_ptrs, y_ptrs = x_ptr + q0 * s_xt + x_col, y_ptr + q0 * s_yt + x_col
    dt_ptrs = dt_ptr + q0 * s_dtt + h
    b_ptrs, c_ptrs = b_ptr + q0 * s_bt + bc_col, c_ptr + q0 * s_ct + bc_col
    beta_ptrs = beta_ptr + q0 * s_betat + h
    # One flat loop over the item's tokens, a checkpoint stored when its position is reached: a loop over
    # checkpoint segments with an inner loop bounded by the carried segment start ran past the item's rows
    # on an H200 (Triton 3.6; the interpreter ran it right), reading the next item's and unallocated memory.
    ck_i, ck_end = ck_off, ck_off + ck_cnt  # checkpoints are ascending in (start, end] (ForwardItem)
    next_ck = tl.load(ck_pos_ptr + ck_i, mask=ck_i < ck_end, other=-1)
    for pos in range(start, end):
        xv = tl.load(x_ptrs, mask=r_ok, other=0.0).to(tl.float32)
        dt = tl.load(dt_ptrs, mask=r_ok, other=0.0).to(tl.float32) + dtb
        dt = tl.where(dt > 20.0, dt, tl.log(1.0 + tl.exp(dt)))  # softplus, no libdevice
        bv = tl.load(b_ptrs, mask=bc_ok, other=0.0).to(tl.float32)
        cv = tl.load(c_ptrs, mask=bc_ok, other=0.0).to(tl.float32)
        if GDN:
            bv = bv / tl.sqrt(tl.reduce(bv * bv, 1, SUM) + 1e-6)[:, None]
            cv = cv / tl.sqrt(tl.reduce(cv * cv, 1, SUM) + 1e-6)[:, None]
            beta = 1.0 / (1.0 + tl.exp(-tl.load(beta_ptrs, mask=r_ok, other=0.0).to(tl.float32)))
            state = state * tl.exp(dt * a)[:, None]
            state += (beta * (xv - tl.reduce(state * bv, 1, SUM)))[:, None] * bv
            y = tl.reduce(state * cv, 1, SUM)
            beta_ptrs += s_betat
        else:
            state = state * tl.exp(dt * a)[:, None] + (dt * xv)[:, None] * bv
            y = tl.reduce(state * cv, 1, SUM) + dd * xv
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=r_ok)
        x_ptrs += s_xt
        y_ptrs += s_yt
        dt_ptrs += s_dtt
        b_ptrs += s_bt
        c_ptrs += s_ct
        if pos + 1 == next_ck:  # the state after the first pos + 1 tokens goes to the checkpoint's slot
            dst = tl.load(ck_dst_ptr + ck_i).to(tl.int64)
            tl.store(st_ptr + dst * s_ss + st_off, state, mask=st_ok)
            ck_i += 1
            next_ck = tl.load(ck_pos_ptr + ck_i, mask=ck_i < ck_end, other=-1)
    tl.store(st_run, state, mask=st_ok)


def _heads_per_program(num_heads: int) -> int:
    # the interpreter pays per op, so one program takes every head (~6x faster); the GPU wants parallelism
    return triton.next_power_of_2(num_heads) if config.INTERPRET else 1


def ssm_scan(
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
    """y [T, H*P] for x [T, H*P], dt [T, H], B/C [T, G*N] (G groups); updates ssm_state [S, H, P, N] (fp32)
    in place. Given `beta` [T, H], the GatedDeltaNet update (module docstring), else Mamba2's."""
    groups = _check(x, dt, B, C, ssm_state, beta)
    _check_checkpoints(rag, ckpts)
    config.check_device(x, dt, B, C, A, D, dt_bias, ssm_state)
    num_states, H, P, N = ssm_state.shape
    gdn = beta is not None
    beta = dt if beta is None else beta  # an unread stand-in pointer for Mamba2
    y = torch.empty((rag.num_tokens, H * P), dtype=x.dtype, device=x.device)
    dev, bh = x.device, _heads_per_program(H)
    ssm_scan_kernel[(rag.num_items, triton.cdiv(H, bh))](
        x,
        dt,
        B,
        C,
        y,
        A,
        D,
        dt_bias,
        beta,
        ssm_state,
        rag.on("q_off", dev),
        rag.on("starts", dev),
        rag.on("ends", dev),
        to_device(state_ids, dev),
        to_device(ckpts.off, dev),
        to_device(ckpts.count, dev),
        to_device(ckpts.pos, dev),
        to_device(ckpts.dst, dev),
        H,
        P,
        N,
        H // groups,
        x.stride(0),
        dt.stride(0),
        B.stride(0),
        C.stride(0),
        y.stride(0),
        beta.stride(0),
        ssm_state.stride(0),
        BLOCK_H=bh,
        BLOCK_P=triton.next_power_of_2(P),
        BLOCK_N=triton.next_power_of_2(N),
        GDN=gdn,
        num_warps=config.NUM_WARPS,
    )
    return y


def _check(x, dt, B, C, ssm_state, beta) -> int:
    """The number of B/C groups, after checking every shape."""
    _, H, P, N = ssm_state.shape
    if ssm_state.dtype != torch.float32 or not ssm_state.is_contiguous():
        raise ValueError("ssm_scan: the state pool must be contiguous float32")
    groups = B.shape[1] // N if B.dim() == 2 and N else 0
    if groups < 1 or B.shape[1] != groups * N or H % groups:
        raise ValueError(f"ssm_scan: B must be [T, G*{N}] with G dividing {H} heads, got {tuple(B.shape)}")
    widths = (("x", x, H * P), ("dt", dt, H), ("B", B, groups * N), ("C", C, groups * N))
    for name, t, width in widths + ((("beta", beta, H),) if beta is not None else ()):
        if t.dim() != 2 or t.shape[1] != width or t.shape[0] != x.shape[0] or t.stride(1) != 1:
            raise ValueError(
                f"ssm_scan: {name} must be [T, {width}] with unit column stride, got {tuple(t.shape)}"
            )
    return groups


def _check_checkpoints(rag: Ragged, ckpts: Checkpoints) -> None:
    """The kernel stores a checkpoint when its loop reaches the position, so each item's positions must be
    increasing and inside (start, end]; one outside would be skipped silently."""
    for i in range(rag.num_items):
        positions = [pos for pos, _ in ckpts.of(i)]
        start, end = int(rag.starts[i]), int(rag.ends[i])
        if positions != sorted(set(positions)) or any(not start < pos <= end for pos in positions):
            raise ValueError(
                f"ssm_scan: item {i}'s checkpoints {positions} must be increasing, in ({start}, {end}]"
            )
