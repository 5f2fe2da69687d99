"""The executor's kernels against torch's own on the same shapes, as tokens/s: what batch invariance costs.

Every projection of the model (and its LM head) through the batch-invariant matmul (fixed tiles, one K
order, no split-K) against `torch.matmul` (cuBLAS, TF32 allowed for fp32 like the kernel's `tl.dot`);
the paged attention (FULL, and SWA with the model's window) against `scaled_dot_product_attention` on
contiguous K/V (FlashAttention / memory-efficient kernels; SWA through a boolean mask), for a prefill
of `--prefill` tokens and a decode step of `--batch` sequences with `--context` tokens each. Each row
also gives the largest difference between the two results. GPU times: triton.testing.do_bench (median
ms); on a CPU the kernels run under the interpreter, so the figures there only prove the plumbing.

    python benchmarks/executor_kernels.py [--model small] [--device cuda] [--prefill 4096] [--batch 64]
        [--context 2048] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small", choices=["tiny", "small"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--prefill", type=int, default=4096, help="tokens of one prefill chunk")
    parser.add_argument("--batch", type=int, default=64, help="sequences in one decode step")
    parser.add_argument("--context", type=int, default=2048, help="cached tokens of each decoding sequence")
    parser.add_argument("--json", dest="json_path", help="also write the rows here")
    args = parser.parse_args()
    if min(args.prefill, args.batch, args.context) < 1:
        parser.error("--prefill, --batch and --context must be >= 1")
    return args


def _timer(device: str):
    """Seconds of a call (already run once): do_bench's median on a GPU, one perf_counter run on a CPU."""
    if device == "cuda":
        from triton.testing import do_bench

        return lambda fn: do_bench(fn, warmup=10, rep=50, return_mode="median") / 1e3

    def cpu(fn):
        began = time.perf_counter()
        fn()
        return time.perf_counter() - began

    return cpu


def _row(kernel: str, shape: str, tokens: int, ours, theirs, timer) -> dict:
    diff = (ours().float() - theirs().float()).abs().max().item()  # also the warm-up (and the JIT compile)
    ours_s, theirs_s = timer(ours), timer(theirs)
    return {
        "kernel": kernel,
        "shape": shape,
        "tokens": tokens,
        "ours_ms": ours_s * 1e3,
        "torch_ms": theirs_s * 1e3,
        "ours_tokens_per_s": tokens / ours_s,
        "torch_tokens_per_s": tokens / theirs_s,
        "slowdown": ours_s / theirs_s,
        "max_abs_diff": diff if math.isfinite(diff) else None,
    }


def matmul_rows(spec, device: str, tokens: dict[str, int], timer) -> list[dict]:
    import torch

    from executor.kernels.matmul import matmul

    q_dim, kv_dim = spec.num_q_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    mamba_in = spec.mamba_inner_dim() + spec.mamba_conv_channels() + spec.mamba_num_heads
    weights = {
        "qkv": (q_dim + 2 * kv_dim, spec.d_model),
        "o": (spec.d_model, q_dim),
        "mamba_in": (mamba_in, spec.d_model),
        "mamba_out": (spec.d_model, spec.mamba_inner_dim()),
        "gate_up": (2 * spec.d_ff, spec.d_model),
        "down": (spec.d_model, spec.d_ff),
        "lm_head": (spec.vocab_size, spec.d_model),
    }
    gen = torch.Generator().manual_seed(0)
    rows = []
    for phase, count in tokens.items():
        for name, (n, k) in weights.items():
            x = torch.randn(count, k, generator=gen).to(device)
            w = (torch.randn(n, k, generator=gen) * k**-0.5).to(device)
            rows.append(
                _row(
                    f"matmul {name}",
                    f"{phase} {count}x{k} @ {k}x{n}",
                    count,
                    lambda x=x, w=w: matmul(x, w),
                    lambda x=x, w=w: x @ w.T,
                    timer,
                )
            )
    return rows


def _prefill_case(spec, device: str, length: int, window: int, timer) -> dict:
    import numpy as np
    import torch

    from executor.kernels.attention import paged_attention
    from executor.kernels.ragged import Ragged, SlotTable

    gen = torch.Generator().manual_seed(1)
    hq, hkv, d = spec.num_q_heads, spec.num_kv_heads, spec.head_dim
    q = torch.randn(length, hq, d, generator=gen).to(device)
    k, v = (torch.randn(length, hkv, d, generator=gen).to(device) for _ in range(2))
    slots = SlotTable.from_lists([np.random.default_rng(1).permutation(length)])  # pages in any order
    pool_k, pool_v = torch.empty_like(k), torch.empty_like(v)
    pool_k[torch.as_tensor(slots.flat, device=device)], pool_v[torch.as_tensor(slots.flat, device=device)] = (
        k,
        v,
    )
    rag, scale = Ragged(np.array([0]), np.array([length])), d**-0.5
    sq, sk, sv = (t.transpose(0, 1)[None] for t in (q, k, v))  # [1, H, T, D]
    mask = None
    if window:
        pos = torch.arange(length, device=device)
        mask = (pos[None, :] <= pos[:, None]) & (pos[None, :] >= pos[:, None] - window)

    def theirs():
        out = torch.nn.functional.scaled_dot_product_attention(
            sq, sk, sv, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=True
        )
        return out[0].transpose(0, 1)

    label = f"attention {'SWA' if window else 'FULL'} prefill"
    return _row(
        label,
        f"1x{length} tokens, {hq}/{hkv} heads x {d}" + (f", W={window}" if window else ""),
        length,
        lambda: paged_attention(q, pool_k, pool_v, rag, slots, window, scale),
        theirs,
        timer,
    )


def _decode_case(spec, device: str, batch: int, context: int, window: int, timer) -> dict:
    import numpy as np
    import torch

    from executor.kernels.attention import paged_attention
    from executor.kernels.ragged import Ragged, SlotTable

    gen = torch.Generator().manual_seed(2)
    hq, hkv, d, total = spec.num_q_heads, spec.num_kv_heads, spec.head_dim, context + 1
    q = torch.randn(batch, hq, d, generator=gen).to(device)
    k, v = (torch.randn(batch, total, hkv, d, generator=gen).to(device) for _ in range(2))
    perm = np.random.default_rng(2).permutation(batch * total)
    slots = SlotTable.from_lists([perm[i * total : (i + 1) * total] for i in range(batch)])
    flat = torch.as_tensor(slots.flat, device=device)
    pool_k, pool_v = (
        torch.empty(batch * total, hkv, d, device=device),
        torch.empty(batch * total, hkv, d, device=device),
    )
    pool_k[flat], pool_v[flat] = k.reshape(-1, hkv, d), v.reshape(-1, hkv, d)
    rag, scale = Ragged(np.full(batch, context), np.full(batch, total)), d**-0.5
    lo = max(total - 1 - window, 0) if window else 0  # a decode query sees keys [lo, context]
    sk, sv = (t[:, lo:].transpose(1, 2) for t in (k, v))  # [B, Hkv, visible, D]

    def theirs():
        out = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, None], sk, sv, scale=scale, enable_gqa=True
        )
        return out[:, :, 0]

    label = f"attention {'SWA' if window else 'FULL'} decode"
    return _row(
        label,
        f"{batch} x (1 new + {context} cached)" + (f", W={window}" if window else ""),
        batch,
        lambda: paged_attention(q, pool_k, pool_v, rag, slots, window, scale),
        theirs,
        timer,
    )


def attention_rows(spec, device: str, prefill: int, batch: int, context: int, timer) -> list[dict]:
    return [
        case
        for window in (0, spec.window)
        for case in (
            _prefill_case(spec, device, prefill, window, timer),
            _decode_case(spec, device, batch, context, window, timer),
        )
    ]


def format_table(rows: list[dict]) -> str:
    lines = [
        f"{'kernel':<26} {'shape':<40} {'ours tok/s':>12} {'torch tok/s':>12} {'slowdown':>9} {'max diff':>9}"
    ]
    for r in rows:
        diff = "nan" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.1e}"
        lines.append(
            f"{r['kernel']:<26} {r['shape']:<40} {r['ours_tokens_per_s']:>12.4g} "
            f"{r['torch_tokens_per_s']:>12.4g} {r['slowdown']:>8.2f}x {diff:>9}"
        )
    return "\n".join(lines)


def main() -> None:
    args = _parse()
    if args.device == "cpu":  # before any kernel module is imported: @triton.jit reads it when decorating
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from sim.models import get_model

    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # as the kernel's fp32 tl.dot does on sm_90
    spec, timer = get_model(args.model), _timer(args.device)
    rows = matmul_rows(spec, args.device, {"prefill": args.prefill, "decode": args.batch}, timer)
    rows += attention_rows(spec, args.device, args.prefill, args.batch, args.context, timer)
    print(format_table(rows))
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps({"model": args.model, "device": args.device, "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
