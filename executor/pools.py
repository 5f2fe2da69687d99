"""The executor's real memory: tensors indexed by the page, slot and state ids that sim/cache hands out.

FULL and SWA KV pools are paged: the slot of a token is ``page_id * page_size + offset``; each FULL (SWA)
layer owns one K and one V tensor ``[num_pages * page_size, num_kv_heads, head_dim]``. Each MAMBA layer
owns an SSM state ``[num_states, heads, head_dim, state_dim]`` (fp32) and a conv state
``[num_states, conv_kernel - 1, conv_dim]``. Everything starts as NaN and is NaN again once freed
(`poison_*`), so a forward that reads memory the policy does not own produces NaN logits.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np
import torch

from sim.models import FULL, MAMBA, SWA, ModelSpec


def check_supported(spec: ModelSpec) -> None:
    """The executor builds dense models with one KV geometry and one B/C group; say so for anything else."""
    unsupported = {
        "num_experts": spec.num_experts != 1,
        "shared_d_ff": spec.shared_d_ff != 0,
        "full_num_kv_heads": spec.full_num_kv_heads not in (0, spec.num_kv_heads),
        "full_head_dim": spec.full_head_dim not in (0, spec.head_dim),
        "full_k_eq_v": spec.full_k_eq_v,
        "mamba_num_groups": spec.mamba_num_groups != 1,
        "sconv_dims": bool(spec.sconv_dims),
    }
    named = [knob for knob, bad in unsupported.items() if bad]
    if named:
        raise ValueError(
            f"model {spec.name!r}: the executor does not implement {', '.join(named)} "
            "(it runs dense models with one KV geometry and one B/C group, e.g. 'tiny', 'small')"
        )


class Pools:
    def __init__(
        self,
        model_spec: ModelSpec,
        page_size: int,
        num_full_pages: int,
        num_swa_pages: int,
        num_states: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        for name, value in (
            ("page_size", page_size),
            ("num_full_pages", num_full_pages),
            ("num_swa_pages", num_swa_pages),
            ("num_states", num_states),
        ):
            if not isinstance(value, (int, np.integer)) or value < (1 if name == "page_size" else 0):
                raise ValueError(f"Pools: {name} must be a non-negative int (page_size >= 1), got {value!r}")
        check_supported(model_spec)
        self.spec, self.page_size, self.device, self.dtype = model_spec, int(page_size), device, dtype
        self.num_full_pages, self.num_swa_pages, self.num_states = num_full_pages, num_swa_pages, num_states
        kv_shape = (model_spec.num_kv_heads, model_spec.head_dim)
        _check_fits(self._num_bytes(kv_shape), device)
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}
        self.ssm: dict[int, torch.Tensor] = {}
        self.conv: dict[int, torch.Tensor] = {}
        for layer, kind in enumerate(model_spec.layer_kinds):
            if kind in (FULL, SWA):
                pages = num_full_pages if kind == FULL else num_swa_pages
                self.k[layer] = self._nan((pages * page_size, *kv_shape), dtype)
                self.v[layer] = self._nan((pages * page_size, *kv_shape), dtype)
            elif kind == MAMBA:
                self.ssm[layer] = self._nan(
                    (
                        num_states,
                        model_spec.mamba_num_heads,
                        model_spec.mamba_head_dim,
                        model_spec.mamba_state_dim,
                    ),
                    torch.float32,
                )
                self.conv[layer] = self._nan(
                    (num_states, model_spec.mamba_conv_kernel - 1, model_spec.mamba_conv_channels()), dtype
                )

    def _num_bytes(self, kv_shape: tuple[int, int]) -> int:
        """What the tensors below will take, counted before any is allocated."""
        spec, kv_bytes = self.spec, self.dtype.itemsize * kv_shape[0] * kv_shape[1] * 2 * self.page_size
        state_bytes = (
            4 * spec.mamba_num_heads * spec.mamba_head_dim * spec.mamba_state_dim
            + self.dtype.itemsize * (spec.mamba_conv_kernel - 1) * spec.mamba_conv_channels()
        )
        per_layer = {
            FULL: self.num_full_pages * kv_bytes,
            SWA: self.num_swa_pages * kv_bytes,
            MAMBA: self.num_states * state_bytes,
        }
        return sum(per_layer.get(kind, 0) for kind in spec.layer_kinds)

    def _nan(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.full(shape, float("nan"), dtype=dtype, device=self.device)

    def num_slots(self, kind: str) -> int:
        return (self.num_full_pages if kind == FULL else self.num_swa_pages) * self.page_size

    def _layers(self, kind: str) -> list[int]:
        return [i for i, k in enumerate(self.spec.layer_kinds) if k == kind]

    def _page_slots(self, ids: Iterable[int], num_pages: int, what: str) -> torch.Tensor:
        pages = _checked_ids(ids, num_pages, what)
        slots = (pages[:, None] * self.page_size + np.arange(self.page_size)).reshape(-1)
        return torch.as_tensor(slots, device=self.device)

    def poison_full_pages(self, ids: Iterable[int]) -> None:
        slots = self._page_slots(ids, self.num_full_pages, "FULL page")
        for layer in self._layers(FULL):
            self.k[layer][slots] = float("nan")
            self.v[layer][slots] = float("nan")

    def poison_swa_pages(self, ids: Iterable[int]) -> None:
        slots = self._page_slots(ids, self.num_swa_pages, "SWA page")
        for layer in self._layers(SWA):
            self.k[layer][slots] = float("nan")
            self.v[layer][slots] = float("nan")

    def poison_states(self, ids: Iterable[int]) -> None:
        states = torch.as_tensor(_checked_ids(ids, self.num_states, "state"), device=self.device)
        for layer in self._layers(MAMBA):
            self.ssm[layer][states] = float("nan")
            self.conv[layer][states] = float("nan")

    def copy_state(self, src_id: int, dst_id: int) -> None:
        _checked_ids([src_id, dst_id], self.num_states, "state")
        for layer in self._layers(MAMBA):
            self.ssm[layer][dst_id] = self.ssm[layer][src_id]
            self.conv[layer][dst_id] = self.conv[layer][src_id]


def _checked_ids(ids: Iterable[int], limit: int, what: str) -> np.ndarray:
    arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64).reshape(-1)
    bad = arr[(arr < 0) | (arr >= limit)]
    if bad.size:
        raise ValueError(f"{what} id {int(bad[0])} out of range [0, {limit})")
    return arr


def _check_fits(num_bytes: int, device: torch.device | str) -> None:
    """Refuse pools the device cannot hold before allocating them (a CPU allocation past the machine's
    memory is either refused by torch mid-way or, with overcommit, ends in the OOM killer)."""
    if torch.device(device).type == "cuda":
        free_bytes = torch.cuda.mem_get_info(torch.device(device))[0]
    else:
        free_bytes = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if num_bytes > free_bytes:
        raise ValueError(
            f"the executor's pools need {num_bytes / 2**30:.1f} GiB, the {torch.device(device).type} "
            f"device has {free_bytes / 2**30:.1f} GiB free: lower --pool-tokens, --swa-pool-tokens "
            "or --mamba-states"
        )
