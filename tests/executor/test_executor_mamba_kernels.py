"""SSM scan and short conv: against references, checkpoints at absolute positions, resume, chunking."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor.kernels.conv import causal_conv_with_state, conv_silu, conv_silu_ref  # noqa: E402
from executor.kernels.ragged import Checkpoints, Ragged  # noqa: E402
from executor.kernels.scan import ssm_scan  # noqa: E402
from executor.kernels.scan_ref import ssm_scan_ref  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

H, P, N, C, K = 4, 32, 16, 40, 4
NUM_STATES = 12


def _inputs(num_tokens, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, dt = torch.randn(num_tokens, H * P, generator=g), torch.randn(num_tokens, H, generator=g) - 1
    B, Cm = torch.randn(num_tokens, N, generator=g), torch.randn(num_tokens, N, generator=g)
    params = (-1 - 4 * torch.rand(H, generator=g), torch.randn(H, generator=g), 0.1 * torch.randn(H, generator=g))
    states = torch.randn(NUM_STATES, H, P, N, generator=g)
    states[5] = float("nan")  # a fresh sequence must never read its slot
    return [t.to(device) for t in (x, dt, B, Cm, *params, states)]


def test_scan_matches_reference_with_ragged_items_and_checkpoints(device):
    rag = Ragged(np.array([0, 20, 64, 0]), np.array([100, 57, 65, 7]))
    ckpts = Checkpoints.from_lists([[(16, 6), (64, 7), (100, 8)], [], [(65, 9)], [(3, 10)]])
    x, dt, B, Cm, A, D, dtb, states = _inputs(rag.num_tokens, device)
    ref_states = states.clone().cpu()
    got = ssm_scan(x, dt, B, Cm, A, D, dtb, states, rag, [0, 1, 2, 5], ckpts)
    expected = ssm_scan_ref(*(t.cpu() for t in (x, dt, B, Cm, A, D, dtb)), ref_states, rag, [0, 1, 2, 5], ckpts)
    assert torch.allclose(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    assert torch.allclose(states.cpu(), ref_states, atol=1e-5, rtol=1e-5, equal_nan=True)
    assert torch.isfinite(got).all() and torch.isfinite(states[5]).all()
    assert torch.equal(states[8], states[0])  # a checkpoint at the end equals the final state
    assert torch.equal(states[9], states[2]) and torch.isfinite(states[10]).all()
    assert not torch.equal(states[6], states[7])


def test_scan_chunks_decode_and_resume_are_bit_exact(device):
    x, dt, B, Cm, A, D, dtb, states = _inputs(80, device, seed=1)
    one = states.clone()
    y_one = ssm_scan(x, dt, B, Cm, A, D, dtb, one, Ragged([0], [80]), [0], Checkpoints.from_lists([[(48, 3)]]))
    split = states.clone()
    parts = []
    for lo, hi in [(0, 30), (30, 31), (31, 77), (77, 78), (78, 79), (79, 80)]:
        ck = [(48, 3)] if lo < 48 <= hi else []
        parts.append(ssm_scan(x[lo:hi], dt[lo:hi], B[lo:hi], Cm[lo:hi], A, D, dtb, split, Ragged([lo], [hi]),
                              [0], Checkpoints.from_lists([ck])))
    assert torch.equal(torch.cat(parts), y_one)
    assert torch.equal(split[0], one[0]) and torch.equal(split[3], one[3])
    resumed = ssm_scan(x[48:], dt[48:], B[48:], Cm[48:], A, D, dtb, one, Ragged([48], [80]), [3],
                       Checkpoints.from_lists([[]]))
    assert torch.equal(resumed, y_one[48:]) and torch.equal(one[3], one[0])


def _same(a, b) -> bool:
    """Equal bits, NaN where the other is NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def _conv_inputs(num_tokens, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    xbc, w, b = torch.randn(num_tokens, C, generator=g), torch.randn(C, K, generator=g), torch.randn(C, generator=g)
    state = torch.full((NUM_STATES, K - 1, C), float("nan"))
    return [t.to(device) for t in (xbc, w, b, state)]


def test_conv_matches_reference_and_stores_states(device):
    rag = Ragged(np.array([0, 0, 10]), np.array([37, 1, 12]))
    xbc, w, b, state = _conv_inputs(rag.num_tokens, device)
    state[2] = torch.arange(3 * C, dtype=torch.float32, device=device).reshape(3, C) / C
    ckpts = Checkpoints.from_lists([[(2, 3), (37, 4)], [], [(11, 5)]])
    ref_state = state.clone().cpu()
    got = causal_conv_with_state(xbc, rag, [0, 1, 2], ckpts, state, w, b)
    expected = causal_conv_with_state(xbc.cpu(), rag, [0, 1, 2], ckpts, ref_state, w.cpu(), b.cpu(),
                                      conv_silu_ref)
    assert torch.allclose(got.cpu(), expected, atol=1e-5)
    assert _same(state.cpu(), ref_state)  # state rows are copies, identical on both paths
    assert torch.equal(state[0], xbc[34:37]) and torch.equal(state[4], state[0])
    assert torch.equal(state[3][1:], xbc[0:2]) and (state[3][0] == 0).all()  # before position 0: zeros
    assert torch.equal(state[1][2], xbc[37]) and (state[1][:2] == 0).all()
    old = torch.arange(3 * C, dtype=torch.float32, device=device).reshape(3, C) / C
    # item 2 resumes at 10 (old rows = positions 7..9); its checkpoint at 11 holds positions 8..10
    assert torch.equal(state[5], torch.cat([old[1:], xbc[38:39]]))


def test_conv_chunked_equals_one_pass(device):
    xbc, w, b, state = _conv_inputs(50, device, seed=2)
    one = causal_conv_with_state(xbc, Ragged([0], [50]), [0], Checkpoints.from_lists([[]]), state.clone(), w, b)
    parts = [causal_conv_with_state(xbc[lo:hi], Ragged([lo], [hi]), [1], Checkpoints.from_lists([[]]), state, w, b)
             for lo, hi in [(0, 1), (1, 2), (2, 33), (33, 50)]]
    assert torch.equal(torch.cat(parts), one)
    assert torch.equal(conv_silu(xbc[:10], Ragged([0], [7]), w, b), conv_silu(xbc[:10], Ragged([0], [7]), w, b))


def _gdn_inputs(num_tokens, device, groups=2, seed=3):
    """GatedDeltaNet's layout: B (keys) and C (queries) in `groups` groups shared by H / groups heads, a beta."""
    g = torch.Generator().manual_seed(seed)
    x, dt, _, _, A, D, dtb, states = _inputs(num_tokens, device, seed)
    B, Cm = (torch.randn(num_tokens, groups * N, generator=g).to(device) for _ in range(2))
    beta = torch.randn(num_tokens, H, generator=g).to(device)
    return x, dt, B, Cm, A, D, dtb, states, beta


def test_gated_delta_rule_with_groups_matches_reference_and_resumes_bit_exact(device):
    x, dt, B, Cm, A, D, dtb, states, beta = _gdn_inputs(60, device)
    ref_states = states.clone().cpu()
    ck = Checkpoints.from_lists([[(32, 3)]])
    got = ssm_scan(x, dt, B, Cm, A, D, dtb, states, Ragged([0], [60]), [0], ck, beta)
    expected = ssm_scan_ref(*(t.cpu() for t in (x, dt, B, Cm, A, D, dtb)), ref_states, Ragged([0], [60]), [0], ck,
                            beta.cpu())
    assert torch.allclose(got.cpu(), expected, atol=1e-5, rtol=1e-5) and torch.isfinite(got).all()
    mamba2 = ssm_scan(x, dt, B, Cm, A, D, dtb, states.clone(), Ragged([0], [60]), [0], ck)
    assert not torch.allclose(mamba2, got)  # the delta rule is another recurrence, not Mamba2's
    resumed = ssm_scan(x[32:], dt[32:], B[32:], Cm[32:], A, D, dtb, states, Ragged([32], [60]), [3],
                       Checkpoints.from_lists([[]]), beta[32:])
    assert torch.equal(resumed, got[32:]) and torch.equal(states[3], states[0])


def test_scan_rejects_groups_that_do_not_divide_the_heads(device):
    x, dt, B, Cm, A, D, dtb, states, beta = _gdn_inputs(4, device, groups=3)
    with pytest.raises(ValueError, match="G dividing 4 heads"):
        ssm_scan(x, dt, B, Cm, A, D, dtb, states, Ragged([0], [4]), [0], Checkpoints.from_lists([[]]), beta)


@pytest.mark.parametrize("bad", [[(0, 3)], [(8, 3)], [(5, 3), (4, 4)], [(5, 3), (5, 4)]])
def test_scan_rejects_checkpoints_outside_the_item_or_out_of_order(device, bad):
    # the kernel stores a checkpoint when its token loop reaches the position: one it never reaches is an error
    x, dt, B, Cm, A, D, dtb, states = _inputs(7, device)
    with pytest.raises(ValueError, match="checkpoints"):
        ssm_scan(x, dt, B, Cm, A, D, dtb, states, Ragged([0], [7]), [0], Checkpoints.from_lists([bad]))
