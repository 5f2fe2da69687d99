"""Fixed launch constants shared by every kernel, and whether kernels run under the interpreter.

Tile sizes are constants, never tuned per shape: a token's bits may only depend on its own inputs, and a
tile size that followed the batch shape would change the reduction order (triton-on-cpu.md section 5).
"""

from __future__ import annotations

import os

import torch

# Read once, at import: `@triton.jit` reads TRITON_INTERPRET when it decorates, so the kernel objects and
# this flag always agree (tests/executor/conftest.py sets it before any kernel module is imported).
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # numpy >= 2.4 (the device image's 2.5) under triton 3.6's interpreter
    from executor.kernels.interpret_compat import patch_interpreter

    patch_interpreter()

# (BLOCK_M, BLOCK_N, BLOCK_K). The interpreter pays per executed op, not per flop, so it takes big tiles;
# the GPU takes tiles that fit shared memory. Bits need only agree within one device kind.
MATMUL_TILE = (32, 128, 128) if INTERPRET else (64, 64, 32)
ROW_BLOCK = 16  # rows per program for RMSNorm / SiLU-gate / conv
COL_BLOCK = 256 if INTERPRET else 64  # columns per program for SiLU-gate / conv
ATTN_BLOCK_M = 32  # query positions per program, aligned to absolute positions
ATTN_BLOCK_N = 32  # key positions per loop step, aligned to absolute positions (K >= 16 for tl.dot)
NUM_WARPS = 4

# True: interpreted kernels take the GPU's tl.dot branch too (tests/executor/test_executor_dot_branch.py),
# so the code the GPU runs is exercised on a CPU; nothing else sets it.
FORCE_DOT = False


def tile_product_by_sum() -> bool:
    """Whether kernels multiply tiles by broadcast + sum (under the interpreter) rather than `tl.dot`."""
    return INTERPRET and not FORCE_DOT


def check_device(*tensors: torch.Tensor) -> None:
    """Fail clearly instead of with triton's '0 active drivers' when a CPU tensor reaches a kernel."""
    for t in tensors:
        if t.device.type == "cpu" and not INTERPRET:
            raise RuntimeError(
                "triton kernels got a CPU tensor but TRITON_INTERPRET=1 was not set before executor.kernels "
                "was imported; set it (or use kernels='torch')"
            )
