"""Row-at-a-time application of a torch function, the torch references' route to batch invariance.

torch's CPU kernels are not batch invariant: GEMM rounding depends on the row count, and elementwise
transcendentals run a vector body and a scalar tail, so a value's bits can depend on where it sits in a
tensor. Calling the op once per row gives every row the same shapes on every call, whatever the batch.
"""

from __future__ import annotations

from typing import Callable

import torch


def rowwise(fn: Callable[..., torch.Tensor], *tensors: torch.Tensor) -> torch.Tensor:
    """torch.stack([fn(t0[i], t1[i], ...) for each row i]); an empty input gives an empty result."""
    num_rows = tensors[0].shape[0]
    if num_rows == 0:
        probe = fn(*(t.new_zeros(t.shape[1:]) for t in tensors))
        return probe.new_empty((0, *probe.shape))
    return torch.stack([fn(*(t[i] for t in tensors)) for i in range(num_rows)])
