"""Executor tests: run the Triton kernels under the interpreter when there is no CUDA device.

TRITON_INTERPRET is read when `@triton.jit` decorates a kernel, so it is set here, before any test
module imports executor.kernels. (This folder has no __init__.py on purpose: as a package named
`executor` under tests/ it would shadow the real `executor` package.)
"""
from __future__ import annotations

import os

import pytest

try:
    import torch
except ImportError:  # the executor extra is not installed: every test here skips itself
    torch = None

if torch is not None and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # The tests' tensors are tiny: one thread. With two, every torch op opens an OpenMP region, and on a
    # busy 2-core machine its wake-ups made the executor tests ~10x slower. Children (scripts) inherit it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


@pytest.fixture
def device() -> str:
    """Where the Triton kernels run: the GPU when there is one, else the CPU under the interpreter."""
    return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
