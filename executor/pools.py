"""The executor's real memory: tensors indexed by the page, block and state ids the cache manager hands out.

Memory is laid out by a ``MemoryLayout`` (``executor/layout.py``): each group owns, for each of its layers,
tensors indexed by the group's ids. An attention layer (FULL or SWA) of a group with ``n`` ids owns a K and
a V tensor ``[n * page_size, kv_heads, head_dim]`` with its kind's geometry (the slot of a token is
``id * page_size + offset``; a model with ``full_k_eq_v`` keeps one tensor for both on its FULL layers). A
state layer owns a conv state ``[n, conv_kernel - 1, channels]`` (the MAMBA mixer's, or the short-conv
streams' of an sconv model) and, if it is a MAMBA layer, an SSM state ``[n, heads, head_dim, state_dim]``
(fp32). Everything starts as NaN and is NaN again once its owner discards it (``poison``), so a forward that
reads memory the policy does not own produces NaN logits.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from executor.layout import MemoryLayout, by_kind
from executor.memory_check import check_fits, checked_ids, layer_bytes
from executor.support import check_supported
from sim.models import FULL, MAMBA, ModelSpec


class Pools:
    def __init__(
        self,
        model_spec: ModelSpec,
        layout: MemoryLayout,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        check_supported(model_spec)
        self.spec, self.layout, self.device, self.dtype = model_spec, layout, device, dtype
        self.page_size = layout.page_size
        check_fits(
            sum(
                layer_bytes(model_spec, group, group.page_size or layout.page_size, dtype)
                for group in layout.groups
            ),
            device,
        )
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}
        self.ssm: dict[int, torch.Tensor] = {}
        self.conv: dict[int, torch.Tensor] = {}
        for index, group in enumerate(layout.groups):
            for layer in group.layers:
                self._allocate(group.kind, layer, group.num_ids, layout.page_of(index))

    @classmethod
    def by_kind(
        cls,
        model_spec: ModelSpec,
        page_size: int,
        num_full_pages: int,
        num_swa_pages: int,
        num_states: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        window_offset: int = 0,
    ) -> "Pools":
        """Pools like the radix manager's: groups 0, 1, 2 are FULL, SWA and MAMBA."""
        for name, value in (
            ("page_size", page_size),
            ("num_full_pages", num_full_pages),
            ("num_swa_pages", num_swa_pages),
            ("num_states", num_states),
        ):
            if not isinstance(value, (int, np.integer)) or value < (1 if name == "page_size" else 0):
                raise ValueError(f"Pools: {name} must be a non-negative int (page_size >= 1), got {value!r}")
        layout = by_kind(model_spec, int(page_size), num_full_pages, num_swa_pages, num_states, window_offset)
        return cls(model_spec, layout, device, dtype)

    def _allocate(self, kind: str, layer: int, num_ids: int, page_size: int) -> None:
        spec = self.spec
        if kind == MAMBA:
            if spec.layer_kinds[layer] == MAMBA:
                shape = (num_ids, spec.mamba_num_heads, spec.mamba_head_dim, spec.mamba_state_dim)
                self.ssm[layer] = self._nan(shape, torch.float32)
            self.conv[layer] = self._nan(
                (num_ids, spec.mamba_conv_kernel - 1, conv_channels(spec)), self.dtype
            )
            return
        kv_heads, head_dim = spec.full_kv_geometry() if kind == FULL else (spec.num_kv_heads, spec.head_dim)
        self.k[layer] = self._nan((num_ids * page_size, kv_heads, head_dim), self.dtype)
        same = kind == FULL and spec.full_k_eq_v  # one tensor read as both K and V
        self.v[layer] = self.k[layer] if same else self._nan(self.k[layer].shape, self.dtype)

    def _nan(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.full(shape, float("nan"), dtype=dtype, device=self.device)

    def num_slots(self, group: int) -> int:
        return self.layout.groups[group].num_ids * self.layout.page_of(group)

    def num_ids(self, group: int) -> int:
        return self.layout.groups[group].num_ids

    def poison(self, group: int, ids: Iterable[int]) -> None:
        """The ids' memory in every layer of the group goes back to NaN: its owner discarded it."""
        spec = self.layout.groups[group]
        ids_arr = checked_ids(ids, spec.num_ids, f"{spec.kind} group {group} id")
        if spec.is_attention:
            page = self.layout.page_of(group)
            slots = (ids_arr[:, None] * page + np.arange(page)).reshape(-1)
            index = torch.as_tensor(slots, device=self.device)
            for layer in spec.layers:
                self.k[layer][index] = float("nan")
                self.v[layer][index] = float("nan")
            return
        states = torch.as_tensor(ids_arr, device=self.device)
        for layer in spec.layers:
            if layer in self.ssm:
                self.ssm[layer][states] = float("nan")
            self.conv[layer][states] = float("nan")

    def copy_state(self, src_id: int, dst_id: int, group: int | None = None) -> None:
        """Copy a state in every layer of a state group (None: the layout's only one)."""
        if group is None:
            (group,) = self.layout.state_groups
        spec = self.layout.groups[group]
        checked_ids([src_id, dst_id], spec.num_ids, f"state group {group} id")
        for layer in spec.layers:
            if layer in self.ssm:
                self.ssm[layer][dst_id] = self.ssm[layer][src_id]
            self.conv[layer][dst_id] = self.conv[layer][src_id]

    # the radix layout's groups by name (tests and the radix mirror)
    def poison_full_pages(self, ids: Iterable[int]) -> None:
        self.poison(0, ids)

    def poison_swa_pages(self, ids: Iterable[int]) -> None:
        self.poison(1, ids)

    def poison_states(self, ids: Iterable[int]) -> None:
        self.poison(2, ids)


def conv_channels(spec: ModelSpec) -> int:
    """A state layer's conv state width: the MAMBA mixer's conv input, or every short-conv stream."""
    return spec.mamba_conv_channels() if spec.num_layers(MAMBA) else sum(spec.sconv_dims)
