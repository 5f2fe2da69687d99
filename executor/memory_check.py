"""What the pools will take before they are allocated, and ids checked against a group's range.

A CPU allocation past the machine's memory is either refused by torch mid-way or, with overcommit, ends in
the OOM killer; so the bytes are counted first and a layout the device cannot hold is refused by name.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np
import torch

from executor.layout import Group
from sim.models import FULL, MAMBA, ModelSpec


def layer_bytes(spec: ModelSpec, group: Group, page_size: int, dtype: torch.dtype) -> int:
    """What one group's tensors take, over all of its layers."""
    if group.kind == MAMBA:
        conv_width = spec.mamba_conv_channels() if spec.num_layers(MAMBA) else sum(spec.sconv_dims)
        conv = dtype.itemsize * (spec.mamba_conv_kernel - 1) * conv_width
        ssm = 4 * spec.mamba_num_heads * spec.mamba_head_dim * spec.mamba_state_dim
        per_state = [conv + (ssm if spec.layer_kinds[layer] == MAMBA else 0) for layer in group.layers]
        return group.num_ids * sum(per_state)
    kv_heads, head_dim = spec.full_kv_geometry() if group.kind == FULL else (spec.num_kv_heads, spec.head_dim)
    tensors = 1 if group.kind == FULL and spec.full_k_eq_v else 2
    return group.num_ids * page_size * len(group.layers) * tensors * kv_heads * head_dim * dtype.itemsize


def check_fits(num_bytes: int, device: torch.device | str) -> None:
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


def checked_ids(ids: Iterable[int], limit: int, what: str) -> np.ndarray:
    arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64).reshape(-1)
    bad = arr[(arr < 0) | (arr >= limit)]
    if bad.size:
        raise ValueError(f"{what} {int(bad[0])} out of range [0, {limit})")
    return arr
