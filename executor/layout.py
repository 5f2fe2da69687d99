"""Which memory each layer reads: the executor's pools as groups of layers addressed by one id space each.

A ``Group`` is a set of layers whose memory one id addresses: an attention group (FULL or SWA) maps a page
(or vLLM block) id to ``page_size`` token slots in each of its layers' K/V tensors; a state group (MAMBA)
maps an id to one recurrent state in each of its layers. Two cache managers hand out ids:

* the radix manager (SGLang, FreeToken, Marconi): one group per kind, FULL / SWA / MAMBA in that order, each
  with its own pool (``by_kind``);
* vLLM's block manager: its KV cache groups (``sim/cache/blocks/layout.py``: layers bucketed by kind, each
  bucket split into groups of ``group_size`` layers, layers ``i::num_groups``), every group addressed by the
  ids of the one shared block pool (``by_blocks``).

The state layers are the MAMBA layers; a model whose only state is short-conv windows on every layer
(``sconv_dims``, Inkling) has every layer as a state layer, as vLLM's planner buckets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.models import FULL, MAMBA, SWA, ModelSpec


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Group:
    kind: str  # FULL or SWA (ids are pages of token slots) or MAMBA (ids are states)
    layers: tuple[int, ...]
    num_ids: int
    page_size: int = (
        0  # tokens per page of this group where they differ (vLLM's per-group block sizes); 0: the layout's
    )

    @property
    def is_attention(self) -> bool:
        return self.kind != MAMBA


@dataclass(frozen=True)
class MemoryLayout:
    page_size: int  # tokens per page (vLLM: per block)
    groups: tuple[Group, ...]
    # keys a SWA query sees before itself, relative to the window W: SGLang's window is W keys before the query
    # (0), vLLM's W tokens with the query itself (-1, FlashAttention's window_size=(W - 1, 0))
    window_offset: int = 0

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"MemoryLayout: page_size must be >= 1, got {self.page_size}")
        for index, group in enumerate(self.groups):
            if group.num_ids < 0:
                raise ValueError(f"MemoryLayout: group {index} has {group.num_ids} ids")

    def page_of(self, group: int) -> int:
        """Tokens per page (id) of ``group``: its own block size, else the layout's."""
        return self.groups[group].page_size or self.page_size

    @property
    def attention_groups(self) -> list[int]:
        return [g for g, group in enumerate(self.groups) if group.is_attention]

    @property
    def state_groups(self) -> list[int]:
        return [g for g, group in enumerate(self.groups) if not group.is_attention]

    def attention_group_of(self, layer: int) -> int:
        return next(g for g in self.attention_groups if layer in self.groups[g].layers)

    def state_group_of(self, layer: int) -> int | None:
        return next((g for g in self.state_groups if layer in self.groups[g].layers), None)


def state_layers(spec: ModelSpec) -> tuple[int, ...]:
    """Layers that carry a recurrent state: the MAMBA layers, or every layer of an sconv-only model."""
    if spec.num_layers(MAMBA):
        return tuple(i for i, kind in enumerate(spec.layer_kinds) if kind == MAMBA)
    return tuple(range(len(spec.layer_kinds))) if spec.sconv_dims else ()


def by_kind(
    spec: ModelSpec,
    page_size: int,
    num_full_pages: int,
    num_swa_pages: int,
    num_states: int,
    window_offset: int = 0,
) -> MemoryLayout:
    """The radix manager's pools: FULL, SWA and MAMBA groups (a kind the model lacks has no layers)."""
    layers = {kind: tuple(i for i, k in enumerate(spec.layer_kinds) if k == kind) for kind in (FULL, SWA)}
    return MemoryLayout(
        page_size,
        (
            Group(FULL, layers[FULL], num_full_pages),
            Group(SWA, layers[SWA], num_swa_pages),
            Group(MAMBA, state_layers(spec), num_states),
        ),
        window_offset,
    )


def _buckets(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """(kind, layers) per bucket, ordered by each bucket's first layer (an sconv bucket comes last)."""
    found = []
    for kind in (FULL, SWA, MAMBA):
        layers = tuple(i for i, k in enumerate(spec.layer_kinds) if k == kind)
        if layers:
            found.append((layers[0], kind, layers))
    if spec.sconv_dims and not spec.num_layers(MAMBA):
        found.append((len(spec.layer_kinds), MAMBA, state_layers(spec)))
    return [(kind, layers) for _, kind, layers in sorted(found)]


def by_blocks(
    spec: ModelSpec,
    block_size: int,
    group_kinds: tuple[str, ...],
    num_blocks: int,
    kind_blocks: dict[str, int] | None = None,
) -> MemoryLayout:
    """vLLM's KV cache groups of ``spec``'s layers, every one addressed by the shared pool's block ids.
    ``group_kinds`` is the block manager's own grouping; the executor's (possibly shrunk) model must group
    the same way, else its memory could not mirror the manager's. ``kind_blocks``: a kind's block size where
    it differs from ``block_size`` (``unify_kv_cache_spec_page_size``: gemma-4's SWA blocks hold 16 tokens
    beside FULL's 32)."""
    buckets = _buckets(spec)
    counts = [len(layers) for _, layers in buckets]
    group_size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    groups = []
    for kind, layers in buckets:
        num_groups = cdiv(len(layers), group_size)
        page = (kind_blocks or {}).get(kind, 0)
        groups += [Group(kind, layers[i::num_groups], num_blocks, page) for i in range(num_groups)]
    mine = tuple(group.kind for group in groups)
    if mine != tuple(group_kinds):
        raise ValueError(
            f"model {spec.name!r}: its layers make vLLM groups {' '.join(mine)}, the cache manager's are "
            f"{' '.join(group_kinds)} (a shrunk model must keep the layer pattern whole)"
        )
    return MemoryLayout(block_size, tuple(groups), window_offset=-1)
