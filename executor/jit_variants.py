"""How many kernel variants Triton's JIT has compiled in this process, to prove a timed run compiled none.

Triton compiles one variant per specialisation of a launch (``scripts/capture_variants.py``); a compile
during a timed step would land in its measured time. ``execute`` counts the compiled variants before and
after the timed pass: the warm-up pass, which runs the same schedule, must already have compiled them all.
Under the interpreter nothing is compiled and the count is None.
"""

from __future__ import annotations


def _kernels() -> list:
    from executor.kernels.attention import paged_attention_kernel
    from executor.kernels.conv import causal_conv_kernel
    from executor.kernels.matmul import bi_matmul_kernel
    from executor.kernels.rmsnorm import rmsnorm_kernel
    from executor.kernels.scan import ssm_scan_kernel
    from executor.kernels.silu_mul import silu_mul_kernel

    return [
        paged_attention_kernel,
        causal_conv_kernel,
        bi_matmul_kernel,
        rmsnorm_kernel,
        ssm_scan_kernel,
        silu_mul_kernel,
    ]


def compiled_variants() -> int | None:
    """Variants compiled so far over every executor kernel and device (None: interpreted, nothing compiles)."""
    total = 0
    for kernel in _kernels():
        caches = getattr(kernel, "device_caches", None)
        if caches is None:
            return None
        total += sum(len(entry[0]) for entry in caches.values())
    return total
