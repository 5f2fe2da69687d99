"""The kernels' `tl.dot` branch (what the GPU runs): a row's bits do not depend on where it sits.

On a GPU these run the real `tl.dot` (TF32 tensor cores on sm_90 for fp32): a matmul row in any batch
position, and an attention query in any chunking or batch, must give the same bits. On a CPU the same
tests force the interpreter through the `tl.dot` branch (`config.FORCE_DOT`), with a row-invariant dot
standing in for the tensor cores (interpreter_dot.py), so the branch's code runs everywhere.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor_helpers import DEVICE, SPEC, PageAlloc, make_pools, make_seq, run_chunks  # noqa: E402

from executor.kernels import config  # noqa: E402
from executor.kernels.attention import paged_attention  # noqa: E402
from executor.kernels.matmul import matmul  # noqa: E402
from executor.kernels.ragged import Ragged, SlotTable  # noqa: E402
from executor.model import HybridModel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

TOL = 1e-4 if DEVICE == "cpu" else 2e-2  # TF32 on the GPU


@pytest.fixture
def dot_branch(monkeypatch):
    if not config.INTERPRET:  # the GPU: the real tl.dot
        yield
        return
    from interpreter_dot import install_row_invariant_dot

    monkeypatch.setattr(config, "FORCE_DOT", True)
    dots = install_row_invariant_dot(monkeypatch)
    assert not config.tile_product_by_sum()
    yield
    assert dots[0] > 0  # the kernels did take the tl.dot branch


def _randn(*shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(DEVICE)


def test_matmul_row_bits_do_not_depend_on_its_batch_position(dot_branch):
    w, row = _randn(150, 200, seed=1), _randn(1, 200, seed=2)
    alone = matmul(row, w)
    assert torch.allclose(alone.double(), row.double() @ w.double().T, atol=TOL * 200 ** 0.5, rtol=TOL)
    for batch, position in [(2, 1), (7, 3), (33, 31), (33, 32), (65, 64), (100, 37), (130, 129)]:
        x = _randn(batch, 200, seed=batch)
        x[position] = row[0]
        assert torch.equal(matmul(x, w)[position], alone[0]), (batch, position)


def _attention_inputs(length: int):
    gen = torch.Generator().manual_seed(3)
    slots = SlotTable.from_lists([np.random.default_rng(3).permutation(160)[:length]])
    k_pool, v_pool = (torch.randn(160, 2, 32, generator=gen).to(DEVICE) for _ in range(2))
    return torch.randn(length, 4, 32, generator=gen).to(DEVICE), k_pool, v_pool, slots


@pytest.mark.parametrize("window", [0, 40])
def test_attention_query_bits_do_not_depend_on_chunking_or_batch(dot_branch, window):
    length, scale = 100, 32 ** -0.5
    q, k_pool, v_pool, slots = _attention_inputs(length)
    one = paged_attention(q, k_pool, v_pool, Ragged([0], [length]), slots, window, scale)
    for lo, hi in [(0, 37), (37, 64), (64, 65), (65, 99), (99, 100)]:
        part = paged_attention(q[lo:hi], k_pool, v_pool, Ragged([lo], [hi]), slots, window, scale)
        assert torch.equal(part, one[lo:hi]), (lo, hi)
    # the same chunk behind another item: other packed rows, the same query tiles
    other = SlotTable.from_lists([slots.flat[:20], slots.flat])
    q_other = torch.cat([_randn(20, 4, 32, seed=4), q[64:100]])
    batched = paged_attention(q_other, k_pool, v_pool, Ragged([0, 64], [20, 100]), other, window, scale)
    assert torch.equal(batched[20:], one[64:])


def test_the_model_is_bit_exact_across_chunks_and_batches(dot_branch):
    model = HybridModel(SPEC, seed=0, device=DEVICE)
    alloc = PageAlloc(seed=5)
    seq, other = make_seq(model, 72, seed=6, alloc=alloc), make_seq(model, 9, seed=7, alloc=alloc)
    expected = run_chunks(model, seq, make_pools(), [0, 72], "triton")
    assert torch.isfinite(expected).all()
    pools = make_pools()
    assert torch.equal(run_chunks(model, seq, pools, [0, 33, 70], "triton"), expected[:70])
    mixed = model.forward([other.item(0, 9, state_id=1), seq.item(70, 72, state_id=0)], pools, "triton")
    assert torch.equal(mixed[1], expected[70:])
