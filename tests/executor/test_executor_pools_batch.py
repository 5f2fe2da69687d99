"""Pools (shapes, NaN poison, state copies), forward-batch validation, model construction and errors."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from executor_helpers import SPEC, PageAlloc, make_pools, make_seq  # noqa: E402

from executor.batch import ForwardBatch, kind_item  # noqa: E402
from executor.model import HybridModel  # noqa: E402
from executor.pools import Pools  # noqa: E402
from executor.weights import init_weights  # noqa: E402
from sim.models import get_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def test_pool_shapes_follow_the_spec():
    pools = Pools.by_kind(SPEC, 16, 5, 3, 4)
    full_layer, swa_layer, mamba_layer = (SPEC.layer_kinds.index(k) for k in ("full", "swa", "mamba"))
    assert pools.k[full_layer].shape == (80, SPEC.num_kv_heads, SPEC.head_dim)
    assert pools.v[swa_layer].shape == (48, SPEC.num_kv_heads, SPEC.head_dim)
    assert pools.ssm[mamba_layer].shape == (4, SPEC.mamba_num_heads, SPEC.mamba_head_dim, SPEC.mamba_state_dim)
    assert pools.ssm[mamba_layer].dtype == torch.float32
    assert pools.conv[mamba_layer].shape == (4, SPEC.mamba_conv_kernel - 1, SPEC.mamba_conv_channels())
    assert all(torch.isnan(t).all() for t in (*pools.k.values(), *pools.ssm.values(), *pools.conv.values()))


def test_poison_and_copy_touch_exactly_their_ids():
    pools = Pools.by_kind(SPEC, 4, 6, 6, 5)
    for tensors in (pools.k, pools.v, pools.ssm, pools.conv):
        for t in tensors.values():
            t.zero_()
    pools.poison_swa_pages([2])
    swa = pools.k[SPEC.layer_kinds.index("swa")]
    assert torch.isnan(swa[8:12]).all() and not torch.isnan(swa[:8]).any() and not torch.isnan(swa[12:]).any()
    assert not torch.isnan(pools.k[SPEC.layer_kinds.index("full")]).any()
    pools.poison_full_pages([0, 5])
    full = pools.v[SPEC.layer_kinds.index("full")]
    assert torch.isnan(full[:4]).all() and torch.isnan(full[20:]).all() and not torch.isnan(full[4:20]).any()
    layer = SPEC.layer_kinds.index("mamba")
    pools.ssm[layer][1] = 3.0
    pools.conv[layer][1] = 4.0
    pools.copy_state(1, 3)
    assert (pools.ssm[layer][3] == 3.0).all() and (pools.conv[layer][3] == 4.0).all()
    pools.poison_states([1])
    assert torch.isnan(pools.ssm[layer][1]).all() and torch.isnan(pools.conv[layer][1]).all()
    assert (pools.ssm[layer][3] == 3.0).all()


@pytest.mark.parametrize("call,match", [
    (lambda p: p.poison_full_pages([6]), r"full group 0 id 6 out of range \[0, 6\)"),
    (lambda p: p.poison_swa_pages([-1]), "swa group 1 id -1"),
    (lambda p: p.copy_state(0, 9), "state group 2 id 9"),
])
def test_pools_reject_bad_ids(call, match):
    with pytest.raises(ValueError, match=match):
        call(Pools.by_kind(SPEC, 4, 6, 6, 5))


def test_pools_reject_bad_sizes():
    with pytest.raises(ValueError, match="page_size"):
        Pools.by_kind(SPEC, 0, 6, 6, 5)


def test_a_state_the_executor_cannot_lay_out_is_named():
    spec = SPEC.replace(sconv_dims=(64, 64, 64, 64, 128, 128))  # short-conv streams beside MAMBA layers
    for build in (lambda: Pools.by_kind(spec, 8, 1, 1, 1), lambda: HybridModel(spec)):
        with pytest.raises(ValueError, match="sconv_dims.*beside MAMBA layers"):
            build()


def test_full_layers_own_kv_geometry_and_k_equal_v():
    spec = get_model("tiny").replace(full_num_kv_heads=1, full_head_dim=64, full_k_eq_v=True)
    pools = Pools.by_kind(spec, 4, 3, 3, 2)
    full, swa = spec.layer_kinds.index("full"), spec.layer_kinds.index("swa")
    assert pools.k[full].shape == (12, 1, 64) and pools.v[full] is pools.k[full]
    assert pools.k[swa].shape == (12, spec.num_kv_heads, spec.head_dim) and pools.v[swa] is not pools.k[swa]


def _item(**kw):
    base = dict(token_ids=[1, 2, 3], start=2, full_slots=np.arange(5), swa_slots=np.arange(5), state_id=0)
    return kind_item(**{**base, **kw})


@pytest.mark.parametrize("kw,match", [
    (dict(token_ids=[]), "at least one token"),
    (dict(start=-1), "start >= 0"),
    (dict(checkpoints=[(2, 1)]), r"checkpoint positions \[2\] must be increasing, in \(2, 5\]"),
    (dict(checkpoints=[(4, 1), (3, 2)]), "increasing"),
    (dict(checkpoints=[(4, 0)]), "running state 0"),
    (dict(logits_from=6), "logits_from=6"),
    (dict(token_ids=[1.5, 2.0, 3.0]), "token_ids must be integers"),
])
def test_batch_item_rejects_bad_fields(kw, match):
    with pytest.raises(ValueError, match=match):
        _item(**kw)


def test_batch_item_defaults_to_last_position_logits():
    item = _item()
    assert item.end == 5 and item.logits_from == 4
    batch = ForwardBatch([item, _item(start=0, token_ids=[7], logits_from=0)])
    assert [r.tolist() for r in batch.logit_rows()] == [[2], [3]]


@pytest.mark.parametrize("kw,match", [
    (dict(full_slots=np.arange(4)), "full group 0 slots has 4 entries, need 5"),
    (dict(full_slots=np.array([0, -1, 2, 3, 4])), r"full group 0 slots\[1\] = -1 out of range"),
    (dict(swa_slots=np.array([0, 1, 2, -1, 4])), "new positions"),
    (dict(swa_slots=np.array([0, 1, 2, 3, 10**6])), r"swa group 1 slots\[4\]"),
    (dict(state_id=8), "state 8 of state group 2 out of range"),
    (dict(checkpoints=[(4, 99)]), "checkpoint 99 of state group 2"),
    (dict(token_ids=[1, 2, 512]), "vocab ids"),
])
def test_forward_rejects_ids_outside_the_pools(kw, match):
    model = HybridModel(SPEC, seed=0)
    with pytest.raises(ValueError, match=match):
        model.forward([_item(**kw)], make_pools("cpu"), kernels="torch")


def test_forward_rejects_unknown_kernels_and_foreign_pools():
    model = HybridModel(SPEC, seed=0)
    with pytest.raises(ValueError, match="unknown kernels 'cuda'"):
        model.forward([_item()], make_pools("cpu"), kernels="cuda")
    with pytest.raises(ValueError, match="pools were built for"):
        model.forward([_item()], Pools.by_kind(get_model("small"), 8, 1, 1, 1), kernels="torch")


def test_weights_are_a_function_of_the_seed():
    a, b, c = init_weights(SPEC, 3), init_weights(SPEC, 3), init_weights(SPEC, 4)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["lm_head"], c["lm_head"])


def test_same_seed_same_logits_and_map_token_ids():
    model = HybridModel(SPEC, seed=5)
    ids = np.array([0, 511, 512, 2**62 + 7], dtype=np.int64)
    assert model.map_token_ids(ids).tolist() == [0, 511, 0, (2**62 + 7) % 512]
    with pytest.raises(ValueError, match="non-negative"):
        model.map_token_ids(np.array([-3]))
    seq = make_seq(model, 20, seed=0, alloc=PageAlloc(0))
    first = model.forward([seq.item(0, 20)], make_pools("cpu"), kernels="torch")[0]
    again = HybridModel(SPEC, seed=5).forward([seq.item(0, 20)], make_pools("cpu"), kernels="torch")[0]
    other = HybridModel(SPEC, seed=6).forward([seq.item(0, 20)], make_pools("cpu"), kernels="torch")[0]
    assert first.shape == (20, SPEC.vocab_size) and torch.equal(first, again)
    assert not torch.allclose(first, other)


def test_triton_and_torch_kernels_agree(device):
    model = HybridModel(SPEC, seed=0, device=device)
    seq = make_seq(model, 40, seed=1, alloc=PageAlloc(1))
    items = [seq.item(0, 40, checkpoints=[(16, 1)])]
    pools_t, pools_r = make_pools(device), make_pools(device)
    got = model.forward(items, pools_t, kernels="triton")[0]
    expected = model.forward(items, pools_r, kernels="torch")[0]
    tol = 1e-4 if device == "cpu" else 5e-2
    assert torch.allclose(got, expected, atol=tol, rtol=tol)
    layer = SPEC.layer_kinds.index("mamba")
    assert torch.allclose(pools_t.ssm[layer][1], pools_r.ssm[layer][1], atol=tol, rtol=tol)
