"""matmul, RMSNorm, SiLU-gate and RoPE: against references, and batch invariance (row bits)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor.kernels.matmul import matmul, matmul_ref  # noqa: E402
from executor.kernels.rmsnorm import rmsnorm, rmsnorm_ref  # noqa: E402
from executor.kernels.rope import BLOCK, RopeTable, apply_rope  # noqa: E402
from executor.kernels.silu_mul import silu_mul, silu_mul_ref  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _randn(*shape, seed=0, device="cpu"):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(device)


@pytest.mark.parametrize("m,k,n", [(1, 128, 384), (7, 100, 129), (37, 300, 64), (100, 16, 1)])
def test_matmul_matches_float64(device, m, k, n):
    x, w = _randn(m, k, seed=1, device=device), _randn(n, k, seed=2, device=device)
    exact = (x.double() @ w.double().T).float()
    tol = 1e-4 if device == "cpu" else 2e-2  # the GPU's fp32 tl.dot is TF32
    assert torch.allclose(matmul(x, w), exact, atol=tol * k ** 0.5, rtol=tol)
    assert torch.allclose(matmul_ref(x, w), exact, atol=1e-4 * k ** 0.5, rtol=1e-4)


@pytest.mark.parametrize("fn", [matmul, matmul_ref], ids=["triton", "torch"])
def test_matmul_rows_do_not_depend_on_the_batch(device, fn):
    x, w = _randn(70, 200, seed=3, device=device), _randn(150, 200, seed=4, device=device)
    full = fn(x, w)
    for lo, hi in [(0, 1), (5, 6), (3, 40), (33, 70), (69, 70)]:
        assert torch.equal(fn(x[lo:hi], w), full[lo:hi]), (lo, hi)
    shuffled = torch.randperm(70, generator=torch.Generator().manual_seed(5))
    assert torch.equal(fn(x[shuffled], w), full[shuffled])


def test_matmul_rejects_bad_shapes():
    with pytest.raises(ValueError, match="matmul"):
        matmul(torch.zeros(3, 4), torch.zeros(5, 6))


@pytest.mark.parametrize("pair", [(rmsnorm, rmsnorm_ref), (silu_mul, silu_mul_ref)], ids=["rmsnorm", "silu"])
def test_rowwise_ops_match_reference_and_are_row_invariant(device, pair):
    kernel, ref = pair
    x = _randn(37, 128, seed=6, device=device) * 3
    second = (1 + 0.1 * _randn(128, seed=7, device=device)) if kernel is rmsnorm else _randn(37, 128, seed=8,
                                                                                               device=device)
    args = (lambda rows: (x[rows], second)) if kernel is rmsnorm else (lambda rows: (x[rows], second[rows]))
    full, expected = kernel(*args(slice(None))), ref(*args(slice(None)))
    assert torch.allclose(full, expected, atol=1e-5, rtol=1e-5)
    for fn, whole in ((kernel, full), (ref, expected)):
        for rows in (slice(0, 1), slice(17, 18), slice(5, 37)):
            assert torch.equal(fn(*args(rows)), whole[rows])


def test_silu_mul_takes_column_slices(device):
    gate_up = _randn(9, 2 * 96, seed=9, device=device)
    got = silu_mul(gate_up[:, :96], gate_up[:, 96:])
    assert torch.allclose(got, torch.nn.functional.silu(gate_up[:, :96]) * gate_up[:, 96:], atol=1e-6)


def test_rope_rotates_pairs_by_position_angle():
    table = RopeTable(8, theta=100.0)
    pos = torch.tensor([0, 3, BLOCK + 5])
    cos, sin = table.lookup(pos)
    x = _randn(3, 2, 8, seed=10)
    got = apply_rope(x, cos, sin)
    freqs = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angle = pos.double()[:, None, None] * freqs
    z = torch.complex(x[..., :4].double(), x[..., 4:].double()) * torch.exp(1j * angle)
    assert torch.allclose(got, torch.cat((z.real, z.imag), -1).float(), atol=1e-5)
    assert torch.equal(got[0], x[0])  # position 0 is the identity


def test_rope_table_values_do_not_depend_on_growth():
    grown = RopeTable(16)
    grown.lookup(torch.tensor([3 * BLOCK + 1]))
    fresh = RopeTable(16)
    pos = torch.tensor([7, BLOCK - 1, BLOCK])
    assert all(torch.equal(a, b) for a, b in zip(grown.lookup(pos), fresh.lookup(pos), strict=True))


def test_the_interpreter_converts_loop_bounds_without_numpy_scalar_conversion():
    """numpy >= 2.4 refuses int() of a 1-element 1-D array, which triton 3.6's interpreter did for runtime loop
    bounds; executor/kernels/interpret_compat.py converts through the element (scripts/device_env_check.sh
    runs these tests on numpy 2.4, where without it every kernel with a runtime loop fails)."""
    import numpy as np

    from executor.kernels import config
    from executor.kernels.interpret_compat import _index

    class Handle:
        data = np.array([7], dtype=np.int32)

    class Tensor:
        handle = Handle()

    assert _index(Tensor()) == 7 and type(_index(Tensor())) is int
    if config.INTERPRET:
        from triton.runtime import interpreter

        assert interpreter._patch_lang_tensor._numpy_scalar_safe
