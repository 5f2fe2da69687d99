"""Under the Triton interpreter, a `tl.dot` that reduces every output row the same way, as the GPU's MMA does.

The interpreter computes `tl.dot` with numpy's matmul (OpenBLAS). Its rounding of a row may depend on the
row's place in the tile (some CPUs' kernels walk rows in 6-row panels, and edge rows take another path),
which the GPU's tensor cores do not do. Tests that run the kernels' `tl.dot` branch on a CPU swap in a
broadcast multiply + sum over K: every row reduced in one fixed order, so what they check is the
kernel's own logic (masks, tile alignment, accumulation order), the part the GPU shares.
"""
from __future__ import annotations

import numpy as np
from triton.runtime import interpreter


def install_row_invariant_dot(monkeypatch) -> list[int]:
    """Patch the interpreter's dot; returns a one-element counter of the dots it has computed since."""
    original = interpreter.InterpreterBuilder.create_dot
    calls = [0]

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        calls[0] += 1
        if a.data.ndim != 2 or not np.issubdtype(d.data.dtype, np.floating):
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = d.data.dtype
        product = (a.data.astype(acc)[:, :, None] * b.data.astype(acc)[None, :, :]).sum(axis=1)
        return interpreter.TensorHandle(product + d.data, d.dtype.scalar)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", create_dot)
    return calls
