"""Bit-exactness of the whole tiny model: a token's logits never depend on chunking, batching, resuming.

Run for both kernel sets (Triton under the interpreter on CPU, and the torch references).
"""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor_helpers import DEVICE, SPEC, PageAlloc, make_pools, make_seq, run_chunks  # noqa: E402

from executor.model import HybridModel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning",
                                        "ignore:All-NaN slice encountered:RuntimeWarning")

LENGTH = 80  # > the window (64), with decode steps crossing a 32-position tile boundary


@pytest.fixture(scope="module", params=["triton", "torch"])
def kernels(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def model() -> HybridModel:
    return HybridModel(SPEC, seed=0, device=DEVICE)


@pytest.fixture(scope="module")
def one_pass(model, kernels):
    """(seq, logits of all positions from one forward, pools after it) for the standard sequence."""
    alloc = PageAlloc(seed=1)
    seq = make_seq(model, LENGTH, seed=2, alloc=alloc)
    pools = make_pools()
    logits = run_chunks(model, seq, pools, [0, LENGTH], kernels)
    assert torch.isfinite(logits).all()
    return seq, logits, pools, alloc


@pytest.mark.parametrize("bounds", [
    [0, 1, 37, 64, LENGTH],                # a 1-token first chunk, then uneven chunks
    [0, 62, 63, 64, 65, 66, LENGTH],       # prefill, then token-by-token decode across position 64
], ids=["chunks", "decode"])
def test_chunked_equals_one_pass(model, kernels, one_pass, bounds):
    seq, expected, _, _ = one_pass
    got = run_chunks(model, seq, make_pools(), bounds, kernels)
    assert torch.equal(got, expected)


def test_resume_from_checkpoint(model, kernels, one_pass):
    seq, expected, _, _ = one_pass
    pools = make_pools()
    model.forward([seq.item(0, 60, state_id=0, checkpoints=[(32, 1), (48, 2)])], pools, kernels)
    pools.copy_state(2, 3)  # a second request reusing the prefix [0, 48) gets its own copy
    pools.poison_states([0, 2])
    got = model.forward([seq.item(48, LENGTH, state_id=3)], pools, kernels)[0]
    assert torch.equal(got, expected[48:])
    pools.copy_state(1, 4)
    got = model.forward([seq.item(32, 40, state_id=4)], pools, kernels)[0]
    assert torch.equal(got, expected[32:40])


def test_batched_equals_alone(model, kernels, one_pass):
    seq, expected, _, alloc = one_pass
    other, fresh = make_seq(model, 31, seed=3, alloc=alloc), make_seq(model, 23, seed=4, alloc=alloc)
    pools = make_pools()
    # prefixes, themselves batched: seq [0, 40) and other [0, 30)
    model.forward([seq.item(0, 40, state_id=0), other.item(0, 30, state_id=1)], pools, kernels)
    mixed = model.forward([other.item(30, 31, state_id=1), seq.item(40, LENGTH, state_id=0),
                           fresh.item(0, 23, state_id=2)], pools, kernels)
    assert torch.equal(mixed[1], expected[40:])
    alone = make_pools()
    assert torch.equal(mixed[0], run_chunks(model, other, alone, [0, 31], kernels, state_id=5)[30:])
    assert torch.equal(mixed[2], run_chunks(model, fresh, alone, [0, 23], kernels, state_id=6))


def test_freed_swa_page(model, kernels, one_pass):
    """Decode at 79 sees keys [15, 79] (the window counts the 64 keys before it); page 0 (positions 0..7)
    lies below that window but inside the 32-aligned key block the kernel walks; page 1 (8..15) holds
    position 15, the window's oldest key."""
    seq, expected, _, _ = one_pass
    pools = make_pools()
    run_chunks(model, seq, pools, [0, 79], kernels)

    def decode(poisoned_page: int | None):
        trial = copy.deepcopy(pools)
        if poisoned_page is not None:
            trial.poison_swa_pages([int(seq.swa_pages[poisoned_page])])
        return model.forward([seq.item(79, LENGTH)], trial, kernels)[0]

    assert torch.equal(decode(None), expected[79:])
    assert torch.equal(decode(0), expected[79:])
    assert torch.isnan(decode(1)).all()
