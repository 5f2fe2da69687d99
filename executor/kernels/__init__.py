"""Triton kernels of the executor, each beside a plain-torch reference (see docs/executor.md).

Import nothing here: importing a kernel module runs `@triton.jit`, which must happen after
TRITON_INTERPRET is settled (tests/executor/conftest.py), and `get_ops` lives in `ops`.
"""
