"""How vLLM 0.33.0 lays a model out in its one block pool: the KV cache groups, the block size, the bytes of
one block, and the start-up minimum (docs/vllm-rules.md section 2).

* Groups (``v1/core/kv_cache_planning.py:_get_kv_cache_groups_uniform_page_size``): layers are bucketed by
  kind; ``group_size`` is the smallest bucket's layer count (the largest if it is under 1.5 times the
  smallest); each bucket splits into ``cdiv(layers, group_size)`` groups; buckets are ordered by their first
  layer. A model whose only state is short-conv windows on every layer (Inkling) gets a MAMBA bucket of all
  its layers, after the attention buckets (vLLM serves no such model; this is our reading).
* Block size (``platforms/interface.py:Platform._align_hybrid_block_size``): the attention page must hold a
  Mamba state, so ``B = align * cdiv(mamba_page, align * attention_bytes_per_token)`` rounded to the kernel
  block, never below the configured ``--block-size``.
* Block size per group (``kv_cache_planning.py:unify_kv_cache_spec_page_size``): every layer's page is made
  the largest one; an attention kind whose page divides it gets its block size scaled (gemma-4: its FULL
  layers store half the bytes of its SWA layers, so FULL blocks hold ``2B`` tokens), a Mamba page or one
  that does not divide is padded instead. The scheduler block is the lcm of the groups' block sizes
  (``resolve_kv_cache_block_sizes``: hits land on it), the hash block their gcd (the chain of keys).
* Start-up check (``kv_cache_planning.py:get_kv_cache_configs``): the pool holds one ``max_model_len``
  request of every group, plus the null block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from sim.align import ceil_div
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.policy import Policy, own_knobs
from sim.cache.resolve import resolve
from sim.models import FULL, MAMBA, SWA, ModelSpec

KERNEL_BLOCK = 16  # FlashAttention: get_supported_kernel_block_sizes() == [MultipleOf(16)]
FLASHINFER_GDN_ALIGNMENT = (
    64  # v1/attention/backends/gdn_attn.py: FlashInfer GDN prefill checkpoint alignment
)


@dataclass(frozen=True)
class Layout:
    block_size: int  # the scheduler block: the lcm of the groups' block sizes (a hit is a multiple of it)
    group_kinds: tuple[str, ...]  # FULL / SWA / MAMBA per group, in vLLM's group order
    block_bytes: int  # the memory of one block id across every group's layers
    window: int  # SWA window (0 without SWA)
    checkpoint_blocks: int  # MambaSpec.num_prefill_checkpoint_blocks: 1 with internal prefill checkpoints
    kind_blocks: tuple[tuple[str, int], ...] = ()  # each kind's block size where it is not block_size

    def block_of(self, kind: str) -> int:
        """The block size of a kind's groups (tokens a block of that group holds)."""
        return self._kind_block.get(kind, self.block_size)

    @cached_property
    def _kind_block(self) -> dict[str, int]:
        """``kind_blocks`` as a map, built once: ``block_of`` runs several times per block per step."""
        return dict(self.kind_blocks)

    @cached_property
    def group_blocks(self) -> tuple[int, ...]:
        """Each group's block size, in group order (computed once: read on every step hashed)."""
        return tuple(self.block_of(kind) for kind in self.group_kinds)

    @cached_property
    def hash_block(self) -> int:
        """The hash block: the gcd of the groups' block sizes; a group's block ``j`` is keyed by hash block
        ``(j + 1) * block / hash_block - 1``."""
        return math.gcd(*(self.block_of(kind) for kind in self.kinds))

    @cached_property
    def uniform_block(self) -> int:
        """The block size every group shares, or 0 where they differ (gemma-4): a step's "is there anything
        to do" tests are then one comparison against the groups' least count, not one per group."""
        return self.block_size if len(set(self.group_blocks)) == 1 else 0

    def key_index(self, kind: str, index: int) -> int:
        """The hash block whose key names block ``index`` of a ``kind`` group (the one it ends with)."""
        return (index + 1) * self.key_stride[kind] - 1

    @cached_property
    def key_stride(self) -> dict[str, int]:
        """Hash blocks per block of each kind (computed once: read for every block hashed)."""
        return {kind: self.block_of(kind) // self.hash_block for kind in (FULL, SWA, MAMBA)}

    @cached_property
    def swa_need(self) -> int:
        """Blocks of the window a SWA hit needs before it: cdiv(W - 1, SWA block) (computed once: read on
        every block hashed)."""
        return ceil_div(self.window - 1, self.block_of(SWA)) if self.window else 0

    @cached_property
    def kinds(self) -> tuple[str, ...]:
        """Each kind once, in group order (computed once: read at every block a decode fills)."""
        return tuple(dict.fromkeys(self.group_kinds))

    def groups_of(self, kind: str) -> list[int]:
        return self._groups_by_kind.get(kind, [])

    @cached_property
    def _groups_by_kind(self) -> dict[str, list[int]]:
        """Each kind's group indices, in order (computed once: read at every block boundary of a decode)."""
        groups: dict[str, list[int]] = {}
        for index, kind in enumerate(self.group_kinds):
            groups.setdefault(kind, []).append(index)
        return groups

    def min_blocks(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """The fewest blocks vLLM starts with: the null block plus one ``max_model_len`` request per group
        (FULL its length; SWA ``W - 1`` plus the tokens in flight, ``SlidingWindowSpec.max_admission_blocks_
        per_request``; align-mode Mamba two states plus the checkpoint, ``MambaSpec.max_memory_usage_bytes``)."""
        total = 1
        for kind in self.group_kinds:
            B = self.block_of(kind)
            if kind == FULL:
                total += ceil_div(max_model_len, B)
            elif kind == SWA:
                total += ceil_div(min(self.window - 1 + max_in_flight_tokens, max_model_len), B) + 1
            else:
                total += 2 + self.checkpoint_blocks
        return total

    def longest_model_len(self, num_blocks: int, max_in_flight_tokens: int) -> int:
        """The largest ``max_model_len`` the start-up check lets ``num_blocks`` serve (0: none)."""
        low, high = 0, 2**31 - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.min_blocks(middle, max_in_flight_tokens) <= num_blocks:
                low = middle
            else:
                high = middle - 1
        return low


def kv_buckets(model: ModelSpec) -> list[tuple[str, int]]:
    """(kind, layers) per spec bucket, ordered by each bucket's first layer."""
    kinds = model.layer_kinds
    buckets = [
        (kinds.index(kind), kind, model.num_layers(kind)) for kind in (FULL, SWA, MAMBA) if kind in kinds
    ]
    if model.sconv_dims and not model.num_layers(MAMBA):
        buckets.append((len(kinds), MAMBA, len(kinds)))
    return [(kind, count) for _, kind, count in sorted(buckets)]


def group_kinds(model: ModelSpec) -> tuple[str, ...]:
    buckets = kv_buckets(model)
    counts = [count for _, count in buckets]
    group_size = min(counts)
    if max(counts) < 1.5 * group_size:
        group_size = max(counts)
    return tuple(kind for kind, count in buckets for _ in range(ceil_div(count, group_size)))


def layers_per_group(model: ModelSpec) -> int:
    counts = [count for _, count in kv_buckets(model)]
    return max(counts) if max(counts) < 1.5 * min(counts) else min(counts)


def attention_bytes_per_token(model: ModelSpec, kind: str = FULL) -> int:
    """One attention layer's K and V of one token (``FullAttentionSpec(block_size=1).page_size_bytes``)."""
    kv_heads, head_dim = model.full_kv_geometry() if kind == FULL else (model.num_kv_heads, model.head_dim)
    return 2 * kv_heads * head_dim * model.dtype_bytes


def mamba_layer_bytes(model: ModelSpec) -> int:
    """One Mamba layer's state (conv + SSM), or one layer's short-conv windows for an sconv-only model."""
    sconv = max(model.mamba_conv_kernel - 1, 0) * sum(model.sconv_dims) * model.dtype_bytes
    num_mamba = model.num_layers(MAMBA)
    if not num_mamba:
        return sconv
    return (model.mamba_state_bytes() - len(model.layer_kinds) * sconv) // num_mamba + sconv


def hybrid_block_size(model: ModelSpec, block_size: int, prefill_checkpoints: bool) -> int:
    """``Platform._align_hybrid_block_size``: the block a Mamba hybrid runs with (``block_size`` otherwise)."""
    if not model.has_mamba:
        return block_size
    align = max(KERNEL_BLOCK, block_size)
    if prefill_checkpoints:
        align = math.lcm(align, FLASHINFER_GDN_ALIGNMENT)
    derived = align * ceil_div(mamba_layer_bytes(model), align * attention_bytes_per_token(model))
    return max(block_size, KERNEL_BLOCK * ceil_div(derived, KERNEL_BLOCK))


def layout_for(model: ModelSpec, block_size: int, window: int, prefill_checkpoints: bool) -> Layout:
    """``prefill_checkpoints``: GDN prefill runs on FlashInfer, whose layers export checkpoints (a model
    without GDN layers, e.g. Inkling's short convs only, has none to export)."""
    prefill_checkpoints = prefill_checkpoints and model.num_layers(MAMBA) > 0
    B = hybrid_block_size(model, block_size, prefill_checkpoints)
    kinds = group_kinds(model)
    per_group = layers_per_group(model)
    page_bytes = {
        FULL: B * attention_bytes_per_token(model, FULL),
        SWA: B * attention_bytes_per_token(model, SWA),
    }
    if MAMBA in kinds:  # the Mamba page is padded to the attention page (or sets it)
        page_bytes[MAMBA] = max(mamba_layer_bytes(model), B * attention_bytes_per_token(model))
    block_bytes = max(per_group * page_bytes[kind] for kind in kinds)
    blocks = unified_blocks({kind: page_bytes[kind] for kind in kinds}, B)
    scheduler_block = math.lcm(*blocks.values())
    return Layout(
        scheduler_block,
        kinds,
        block_bytes,
        window if SWA in kinds else 0,
        int(prefill_checkpoints and MAMBA in kinds),
        tuple((kind, size) for kind, size in blocks.items() if size != scheduler_block),
    )


def unified_blocks(page_bytes: dict[str, int], B: int) -> dict[str, int]:
    """``unify_kv_cache_spec_page_size``: each kind's block size once every page is the largest page (an
    attention page that divides it grows by blocks; a Mamba page, or one that does not divide, is padded)."""
    largest = max(page_bytes.values())
    return {
        kind: B * (largest // page) if kind != MAMBA and largest % page == 0 else B
        for kind, page in page_bytes.items()
    }


def policy_layout(model: ModelSpec, policy: Policy) -> Layout:
    """The layout vLLM settles for ``policy`` on ``model`` (its window, block size and prefill checkpoints)."""
    prefill_checkpoints = bool(own_knobs(policy, VllmKnobs).prefill_checkpoints)
    return layout_for(model, policy.page_size, resolve(policy, model).window, prefill_checkpoints)
