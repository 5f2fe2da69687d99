"""Paged attention kernel vs the torch reference: ragged batches, GQA/MQA, windows, page sizes, NaN."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor.kernels.attention import paged_attention, query_tiles  # noqa: E402
from executor.kernels.attention_ref import paged_attention_ref  # noqa: E402
from executor.kernels.ragged import Ragged, SlotTable  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning",
                                        "ignore:All-NaN slice encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")

HEAD_DIM = 32
STARTS = np.array([0, 50, 200, 3])  # tokens already cached per item
LENS = np.array([100, 37, 1, 7])    # new tokens per item (the 1 is a decode step)


def _setup(device, page, num_q, num_kv, seed=0):
    """Random pages per item; every slot not owned by an item holds huge garbage."""
    gen, rng = torch.Generator().manual_seed(seed), np.random.default_rng(seed)
    rag = Ragged(STARTS, STARTS + LENS)
    pages_per_item = -(-rag.ends // page)
    perm = rng.permutation(int(pages_per_item.sum()) + 5)
    tables, used = [], 0
    for end, count in zip(rag.ends, pages_per_item, strict=True):
        pages = perm[used:used + count]
        used += count
        tables.append((pages[:, None] * page + np.arange(page)).reshape(-1)[:end])
    num_slots = len(perm) * page
    k_pool = torch.randn(num_slots, num_kv, HEAD_DIM, generator=gen) * 1e4
    v_pool = torch.randn(num_slots, num_kv, HEAD_DIM, generator=gen) * 1e4
    for t in tables:
        k_pool[t] = torch.randn(len(t), num_kv, HEAD_DIM, generator=gen)
        v_pool[t] = torch.randn(len(t), num_kv, HEAD_DIM, generator=gen)
    q = torch.randn(rag.num_tokens, num_q, HEAD_DIM, generator=gen)
    return [t.to(device) for t in (q, k_pool, v_pool)], rag, SlotTable.from_lists(tables)


@pytest.mark.parametrize("window,page,num_q,num_kv", [
    (0, 16, 4, 2),      # full causal, GQA
    (16, 1, 4, 2),      # window smaller than most sequences, page size 1
    (64, 8, 4, 2),      # the tiny model's window
    (1000, 8, 2, 2),    # window longer than every sequence, MHA
    (5, 16, 3, 1),      # tiny window, MQA with a group of 3 (not a power of two)
])
def test_attention_matches_reference(device, window, page, num_q, num_kv):
    (q, k_pool, v_pool), rag, slots = _setup(device, page, num_q, num_kv)
    scale = HEAD_DIM ** -0.5
    got = paged_attention(q, k_pool, v_pool, rag, slots, window, scale)
    expected = paged_attention_ref(q.cpu(), k_pool.cpu(), v_pool.cpu(), rag, slots, window, scale)
    tol = 1e-5 if device == "cpu" else 5e-3
    assert torch.allclose(got.cpu(), expected, atol=tol, rtol=tol)


def test_freed_slot_is_nan_only_where_a_query_reads_it(device):
    (q, k_pool, v_pool), rag, slots = _setup(device, page=8, num_q=4, num_kv=2)
    window, scale = 16, HEAD_DIM ** -0.5
    clean = paged_attention(q, k_pool, v_pool, rag, slots, window, scale)
    # item 2 decodes position 200 and sees keys [184, 200] (the window counts the 16 keys before it):
    # free 176..183 (below), then 184 (the window's oldest key) or 190 (inside)
    flat = slots.flat.copy()
    below = flat.copy()
    below[slots.off[2] + 176:slots.off[2] + 184] = -1
    got = paged_attention(q, k_pool, v_pool, rag, SlotTable(below, slots.off), window, scale)
    assert torch.equal(got, clean)
    row = int(rag.q_off[2])
    others = torch.ones(rag.num_tokens, dtype=torch.bool, device=got.device)
    others[row] = False
    for position in (184, 190):
        inside = flat.copy()
        inside[slots.off[2] + position] = -1
        got = paged_attention(q, k_pool, v_pool, rag, SlotTable(inside, slots.off), window, scale)
        assert torch.isnan(got[row]).all(), position
        assert torch.equal(got[others], clean[others])


def test_query_tiles_sit_on_absolute_block_boundaries():
    items, los = query_tiles(Ragged(np.array([0, 50, 200]), np.array([100, 87, 201])), 32)
    assert items.tolist() == [0, 0, 0, 0, 1, 1, 2]
    assert los.tolist() == [0, 32, 64, 96, 32, 64, 192]


def test_attention_rejects_mismatched_heads():
    rag = Ragged(np.array([0]), np.array([2]))
    with pytest.raises(ValueError, match="multiple"):
        paged_attention(torch.zeros(2, 3, 32), torch.zeros(4, 2, 32), torch.zeros(4, 2, 32), rag,
                        SlotTable.from_lists([np.arange(2)]), 0, 1.0)


@pytest.mark.parametrize("window", [0, 16, 40])
def test_chunks_and_decode_are_bit_exact_and_never_read_ahead(device, window):
    """Same bits for a query whatever chunk it comes in; K/V of later positions (NaN here) are unread."""
    gen = torch.Generator().manual_seed(1)
    length, scale = 100, HEAD_DIM ** -0.5
    slots = SlotTable.from_lists([np.random.default_rng(1).permutation(128)[:length]])
    k_pool, v_pool = (torch.randn(128, 2, HEAD_DIM, generator=gen).to(device) for _ in range(2))
    q = torch.randn(length, 4, HEAD_DIM, generator=gen).to(device)
    one = paged_attention(q, k_pool, v_pool, Ragged([0], [length]), slots, window, scale)
    for lo, hi in [(0, 1), (1, 37), (37, 63), (63, 64), (64, 95), (95, 96), (96, 100)]:
        ahead = torch.as_tensor(slots.flat[hi:], device=device)
        k_now, v_now = k_pool.clone(), v_pool.clone()
        k_now[ahead], v_now[ahead] = float("nan"), float("nan")
        part = paged_attention(q[lo:hi], k_now, v_now, Ragged([lo], [hi]), slots, window, scale)
        assert torch.equal(part, one[lo:hi]), (lo, hi)
